#!/usr/bin/env python3
"""A bulk decision through the inbox page, as an operator makes it, timed.

bench/inbox/run.sh calls it after the page's reads: the list of one
workflow and reason, its bulk form by filter (the oldest 1,000 matching),
the decision (retry) with a reason, the confirmation, and its submit.
Prints one line: the submit's time to first byte (the decisions, one
audit row each, and the page that lists them), the whole submit, and the
outcomes the page reports.

  bulk_page.py URL SECRET USER WORKFLOW REASON
URL is the page's (/webhook/idem-gate/inbox); SECRET and USER are the
sign-in proxy's headers.
"""
import html
import re
import sys
import time
import urllib.parse
import urllib.request

url, secret, user, workflow, reason = sys.argv[1:6]
HEADERS = {"X-Idem-Gate-Proxy": secret, "X-Forwarded-User": user}


def request(data=None, query=""):
    """One request; returns (status, body, seconds to the response's
    headers, seconds to its whole body)."""
    body = None if data is None else urllib.parse.urlencode(data).encode()
    req = urllib.request.Request(url + query, data=body, headers=dict(HEADERS))
    if body is not None:
        req.add_header("Content-Type", "application/x-www-form-urlencoded")
    t0 = time.monotonic()
    try:
        resp = urllib.request.urlopen(req, timeout=120)
    except urllib.error.HTTPError as e:
        resp = e
    t1 = time.monotonic()
    text = resp.read().decode()
    return resp.status, text, t1 - t0, time.monotonic() - t0


def form(text, action):
    """The hidden fields of the page's form for action."""
    m = re.search(r'<form[^>]*data-action="%s"[^>]*>(.*?)</form>' % re.escape(action), text, re.S)
    if not m:
        sys.exit("bulk_page.py: the page has no %s form" % action)
    return {html.unescape(n): html.unescape(v) for n, v in
            re.findall(r'<input type="hidden" name="([^"]*)" value="([^"]*)"', m.group(1))}


status, text, _, _ = request(query="?" + urllib.parse.urlencode({"workflow": workflow, "reason": reason, "limit": "100"}))
if status != 200:
    sys.exit("bulk_page.py: the list answered %d" % status)
fields = form(text, "bulk-review")
fields["scope"] = "filter"
status, text, _, _ = request(fields)
if status != 200:
    sys.exit("bulk_page.py: bulk-review answered %d: %s" % (status, text[:300]))
fields = form(text, "bulk-confirm")
fields.update(decision="retry", reason="bench: bulk retry through the page")
status, text, _, _ = request(fields)
if status != 200:
    sys.exit("bulk_page.py: bulk-confirm answered %d: %s" % (status, text[:300]))
fields = form(text, "bulk-apply")
n = len(__import__("json").loads(fields["keys"]))
status, text, ttfb, whole = request(fields)
if status != 200:
    sys.exit("bulk_page.py: bulk-apply answered %d: %s" % (status, text[:300]))
outcomes = {o: int(c) for c, o in re.findall(r'<span class="n-[a-z_]+">(\d+)</span> ([a-z_]+)', text)}
print("bulk retry of %d claims through the page: %.0f ms to first byte, %.0f ms whole (%s)" % (
    n, ttfb * 1000, whole * 1000, ", ".join("%s %d" % kv for kv in sorted(outcomes.items()))))
