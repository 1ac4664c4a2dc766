"""The A2A endpoint's tests reuse the service's fixtures (tests/service/conftest.py)."""

from __future__ import annotations

from tests.service.conftest import backend as backend
