"""The one API both sides speak: its shape (``GateAPI``), release waits, the codec of its
values on the wire and the HTTP status of each error."""
