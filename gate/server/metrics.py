"""/metrics for Prometheus: built in its own change."""

from fastapi import APIRouter

router = APIRouter()
