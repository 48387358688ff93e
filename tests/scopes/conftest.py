from tests.webhook.conftest import binary, schemas

__all__ = ["binary", "schemas"]
