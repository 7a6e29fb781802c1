"""The tests' harness: throwaway servers (MariaDB, Redis), the service, worker fleets, a fake
GitHub, the Action's runs, prompt and dataset builders, and the CLI as a subprocess."""
