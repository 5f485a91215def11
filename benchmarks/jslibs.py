"""bertviz's JavaScript libraries, served from this machine instead of the CDN its HTML names.

bertviz's HTML loads require.js from cdnjs, and its scripts ask require.js for d3 and jQuery from
cdnjs too. No CDN is reachable here, so the same libraries are fetched once from the npm registry
(``npm pack``, the registry is reachable) into a cache folder and handed to the page through
Playwright's request routing (``page.route``): bertviz itself is not changed.

- require.js 2.3.6: npm ``requirejs@2.3.6`` ``require.js`` (the CDN's ``require.min.js`` is the same
  version minified)
- d3 5.7.0: npm ``d3@5.7.0`` ``dist/d3.min.js`` (the same file)
- jQuery 2.0.0 was never published to npm; its nearest release there, ``jquery@2.1.0``
  ``dist/jquery.min.js``, stands in (bertviz uses only ``$(...)``, ``.append``, ``.val``, ``.on``,
  ``.empty``, ``.attr``)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

CDN = "https://cdnjs.cloudflare.com/ajax/libs/"
LIBS = {  # path under the CDN -> (npm package spec, file inside its tarball)
    "require.js/2.3.6/require.min.js": ("requirejs@2.3.6", "package/require.js"),
    "d3/5.7.0/d3.min.js": ("d3@5.7.0", "package/dist/d3.min.js"),
    "jquery/2.0.0/jquery.min.js": ("jquery@2.1.0", "package/dist/jquery.min.js"),
}


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "attention-lens" / "bench-js"


def ensure(folder: Path | None = None) -> dict[str, Path]:
    """CDN path -> local file, fetching what is missing with ``npm pack``; RuntimeError when it cannot."""
    folder = folder or cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    found: dict[str, Path] = {}
    for cdn_path, (spec, member) in LIBS.items():
        target = folder / spec.replace("@", "-") / Path(member).name
        if not target.exists():
            npm = shutil.which("npm")
            if not npm:
                raise RuntimeError("npm is not installed: cannot fetch bertviz's JavaScript libraries")
            with tempfile.TemporaryDirectory() as tmp:
                done = subprocess.run(
                    [npm, "pack", spec, "--silent", "--pack-destination", tmp],
                    capture_output=True,
                    text=True,
                    timeout=300,
                    cwd=tmp,
                )
                tarballs = list(Path(tmp).glob("*.tgz"))
                if done.returncode != 0 or not tarballs:
                    raise RuntimeError(f"npm pack {spec} failed: {done.stderr.strip()[-300:]}")
                with tarfile.open(tarballs[0]) as archive:
                    data = archive.extractfile(member).read()
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_suffix(".part")
            partial.write_bytes(data)
            partial.replace(target)
        found[cdn_path] = target
    return found


def route_cdn(page, files: dict[str, Path]) -> list[str]:
    """Serve the CDN's URLs from ``files``; anything else there is aborted. Returns the list of URLs served."""
    served: list[str] = []

    def handle(route) -> None:
        path = route.request.url.removeprefix(CDN)
        if path in files:
            served.append(path)
            route.fulfill(path=str(files[path]), content_type="application/javascript")
        else:
            route.abort()

    page.route(CDN + "**", handle)
    return served
