"""The status page (server-rendered HTML): built in its own change."""

from fastapi import APIRouter

router = APIRouter()
