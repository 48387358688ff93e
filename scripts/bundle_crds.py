"""Regenerate webhook/bundled/crds.json.gz: the CRD schemas routegate checks against when neither
``--crds`` nor a cluster provides any (Gateway API v1.6.1 experimental channel + our Route CRD).

Usage: python scripts/bundle_crds.py [GATEWAY_API_INSTALL_YAML]
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = REPO.parent / "shared" / "gateway-api" / "v1.6.1" / "experimental-install.yaml"
ROUTE_CRD = REPO / "manifests" / "base" / "route-crd.yaml"
TARGET = REPO / "webhook" / "bundled" / "crds.json.gz"


def crds(path: Path) -> list[dict[str, object]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "CustomResourceDefinition"]


def main() -> None:
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_SOURCE
    docs = crds(source) + crds(ROUTE_CRD)
    payload = json.dumps({"source": f"{source.name} + {ROUTE_CRD.relative_to(REPO)}", "items": docs},
                         sort_keys=True, separators=(",", ":")).encode()
    TARGET.write_bytes(gzip.compress(payload, compresslevel=9, mtime=0))
    print(f"wrote {len(docs)} CRDs to {TARGET} ({TARGET.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
