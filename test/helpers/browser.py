"""Open an HTML file in headless Chromium (Debian's ``chromium``) and report what a reader would hit.

:func:`probe_page` copies the page with a probe script put first in its head, loads it with
``chromium --headless --dump-dom`` (``file://``, no network, no server) and returns what
the probe saw after the load (and after the report's plotly.js bundle is inflated): console
errors and uncaught exceptions, every ``<video>``
(decoded its first frame or not), every ``<img>`` (decoded or not), every plotly figure
(drew its SVG or not) and the ids of the ``<section>`` elements.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

__all__ = ["chromium", "probe_page", "screenshot", "tag_png", "png_text", "README_PICTURE_SOURCE"]

#: the ``Source`` text of the README's picture: the browser test's screenshot of a calibration report
README_PICTURE_SOURCE = "vid2sid calibration report in headless Chromium (test/test_report_browser.py)"

_PROBE = r"""<script>
window.__errors = [];
window.addEventListener('error', e => window.__errors.push('error: ' + (e.message ||
  ('resource failed: ' + ((e.target && (e.target.src || e.target.currentSrc)) || '').slice(0, 60)))), true);
window.addEventListener('unhandledrejection', e => window.__errors.push('unhandled rejection: ' + e.reason));
const __ce = console.error;
console.error = function (...a) { window.__errors.push('console.error: ' + a.join(' ')); __ce.apply(console, a); };
window.addEventListener('load', async () => {
  if (window.vid2sidPlotly) {  // the report inflates plotly.js asynchronously; its figures draw after
    try { await window.vid2sidPlotly; } catch (e) { window.__errors.push('plotly.js did not load: ' + e); }
    await new Promise(r => setTimeout(r, 500));
  }
  const vids = [...document.querySelectorAll('video')];
  const videos = await Promise.all(vids.map(v => new Promise(res => {
    const done = ok => res({ok: ok && v.videoWidth > 0, width: v.videoWidth, error: v.error && v.error.message,
                            readyState: v.readyState, src: (v.currentSrc || '').slice(0, 24)});
    if (v.readyState >= 2) return done(true);
    v.addEventListener('loadeddata', () => done(true));
    v.addEventListener('error', () => done(false), true);
    setTimeout(() => done(v.readyState >= 2), 8000);
    v.load();
  })));
  const images = [...document.querySelectorAll('img')].map(i => ({ok: i.complete && i.naturalWidth > 0,
                                                                    alt: i.alt}));
  const plots = [...document.querySelectorAll('.plotly-graph-div')].map(d => ({id: d.id,
                                                                             ok: !!d.querySelector('svg.main-svg')}));
  const sections = [...document.querySelectorAll('section[id]')].map(s => s.id);
  const pre = document.createElement('pre');
  pre.id = '__probe';
  pre.textContent = JSON.stringify({errors: window.__errors, videos, images, plots, sections,
                                    title: document.title});
  document.body.appendChild(pre);
});
</script>"""


def chromium() -> str | None:
    """Path of the Chromium executable, or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def probe_page(html: Path, work: Path, *, timeout: float = 60.0) -> dict:
    """Load ``html`` in headless Chromium and return the probe's findings (module docstring),
    plus ``stderr_errors``: the browser's own console-error log lines.

    Raises:
        RuntimeError: Chromium missing, or the page never finished loading (stderr tail).
    """
    exe = chromium()
    if exe is None:
        raise RuntimeError("chromium is not installed")
    doc = Path(html).read_text(encoding="utf-8")
    probed = Path(work) / (Path(html).stem + ".probed.html")
    # first thing in the document, so errors of the page's own scripts (plotly's included) are caught
    head = re.search(r"<head[^>]*>", doc, re.I)
    doc = doc[:head.end()] + _PROBE + doc[head.end():] if head else _PROBE + doc
    probed.write_text(doc, encoding="utf-8")
    profile = Path(work) / "chromium-profile"
    env = dict(os.environ, HOME=str(work))
    proc = subprocess.run([exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-extensions", "--disable-background-networking", "--disable-sync",
                           "--enable-logging=stderr", "--v=0", f"--user-data-dir={profile}",
                           "--virtual-time-budget=20000", "--dump-dom", probed.resolve().as_uri()],
                          capture_output=True, text=True, timeout=timeout, env=env)
    m = re.search(r'<pre id="__probe">(.*?)</pre>', proc.stdout, re.S)
    if m is None:
        raise RuntimeError(f"{html}: the page did not finish loading in chromium: {proc.stderr[-1500:]}")
    import html as _html

    found = json.loads(_html.unescape(m.group(1)))
    found["stderr_errors"] = [ln for ln in proc.stderr.splitlines()
                              if "CONSOLE" in ln and ("Uncaught" in ln or "ERROR" in ln.split("CONSOLE")[0])]
    return found


def screenshot(html: Path, png: Path, work: Path, *, width: int = 1100, height: int = 1400,
               timeout: float = 90.0) -> Path:
    """Save a PNG of ``html`` as headless Chromium draws it (``--screenshot``, ``file://``, no
    network), after scripts ran (``--virtual-time-budget``: the plots are drawn).

    Raises:
        RuntimeError: Chromium missing or no PNG written (stderr tail).
    """
    exe = chromium()
    if exe is None:
        raise RuntimeError("chromium is not installed")
    png = Path(png).resolve()
    proc = subprocess.run([exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-extensions", "--disable-background-networking", "--disable-sync",
                           "--hide-scrollbars", f"--user-data-dir={Path(work) / 'chromium-shot'}",
                           f"--window-size={width},{height}", "--virtual-time-budget=20000",
                           f"--screenshot={png}", Path(html).resolve().as_uri()],
                          capture_output=True, text=True, timeout=timeout, env=dict(os.environ, HOME=str(work)))
    if not png.is_file() or png.stat().st_size == 0:
        raise RuntimeError(f"{html}: chromium wrote no screenshot: {proc.stderr[-1500:]}")
    return png


def tag_png(png: Path, text: str, keyword: str = "Source") -> Path:
    """Put a ``tEXt`` chunk ``keyword: text`` (Latin-1) right after the PNG's ``IHDR`` chunk (PNG spec 11.3.4.3).

    Raises:
        ValueError: ``png`` is not a PNG file.
    """
    import struct
    import zlib

    data = Path(png).read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise ValueError(f"{png}: not a PNG file")
    end = 8 + 12 + struct.unpack(">I", data[8:12])[0]  # signature, then IHDR (length, type, data, CRC)
    body = b"tEXt" + keyword.encode("latin-1") + b"\0" + text.encode("latin-1")
    chunk = struct.pack(">I", len(body) - 4) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
    Path(png).write_bytes(data[:end] + chunk + data[end:])
    return Path(png)


def png_text(png: Path) -> dict[str, str]:
    """The ``tEXt`` chunks of a PNG file as ``{keyword: text}`` (empty for a file that is not a PNG)."""
    import struct

    data = Path(png).read_bytes()
    out: dict[str, str] = {}
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return out
    i = 8
    while i + 8 <= len(data):
        n, kind = struct.unpack(">I", data[i:i + 4])[0], data[i + 4:i + 8]
        if kind == b"tEXt":
            key, _, val = data[i + 8:i + 8 + n].partition(b"\0")
            out[key.decode("latin-1")] = val.decode("latin-1")
        if kind == b"IEND":
            break
        i += 12 + n
    return out
