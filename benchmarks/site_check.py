"""Every page of a built site (`make site`) opened in chromium: figures drawn, console and page errors.

    python benchmarks/site_check.py site/
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.test_site import open_in_browser  # noqa: E402

site = Path(sys.argv[1] if len(sys.argv) > 1 else "site")
seen = open_in_browser(sorted(site.glob("*.html")))
for name, page in seen.items():
    print(f"{name:45} figures {page['figures']:2}  drawn {page['drawn']:2}  errors {len(page['errors'])}")
bad = {n: p for n, p in seen.items() if p["errors"] or p["drawn"] != p["figures"]}
print(json.dumps(bad, indent=1) if bad else f"{len(seen)} pages: every figure drawn, no error logged")
sys.exit(1 if bad else 0)
