"""Write the OpenAPI document of the API to openapi/openapi.json, or check it (--check).

python scripts/export_openapi.py           # regenerate the committed document
python scripts/export_openapi.py --check   # exit 1 when the committed file has drifted
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCUMENT = ROOT / "openapi" / "openapi.json"


def build() -> dict[str, Any]:
    """The app's OpenAPI document (independent of settings and of any running Redis)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from service.api.app import create_app
    from service.settings import Settings

    return create_app(Settings()).openapi()


def render(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the file is out of date")
    parser.add_argument("--output", type=Path, default=DOCUMENT)
    args = parser.parse_args(argv)
    text = render(build())
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is out of date; run: python scripts/export_openapi.py")
            return 1
        print(f"{args.output} is up to date")
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
