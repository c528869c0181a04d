#!/usr/bin/env python3
"""Validate a PGXN META.json against the PGXN Meta Spec 1.0.0
(https://pgxn.org/spec/), the checks of PGXN::Meta::Validator, which no
Debian package ships:

  validate_meta.py path/to/META.json

Also checks the distribution itself: the files that "provides" names
exist, and the version matches the control file's default_version.
Prints one "ok"/"not ok" line per check and ends with "N passed, N failed".
"""
import json
import os
import re
import sys

LICENSES = {
    "agpl_3", "apache_1_1", "apache_2_0", "artistic_1", "artistic_2", "bsd",
    "freebsd", "gfdl_1_2", "gfdl_1_3", "gpl_1", "gpl_2", "gpl_3", "lgpl_2_1",
    "lgpl_3_0", "mit", "mozilla_1_0", "mozilla_1_1", "openssl", "perl_5",
    "postgresql", "qpl_1_0", "ssleay", "sun", "zlib", "open_source",
    "restricted", "unrestricted", "unknown",
}
TOP = {"name", "abstract", "description", "version", "maintainer", "license",
       "provides", "prereqs", "release_status", "resources", "generated_by",
       "tags", "no_index", "meta-spec"}
REQUIRED = ["name", "abstract", "version", "maintainer", "license", "provides", "meta-spec"]
PHASES = {"configure", "build", "runtime", "test", "develop"}
RELATIONS = {"requires", "recommends", "suggests", "conflicts"}
# Semantic Versioning 1.0.0, as PGXN uses it
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)([A-Za-z][0-9A-Za-z-]{0,19})?$")
RANGE_OP = re.compile(r"^\s*(==|!=|>=|<=|>|<)?\s*(\S+)\s*$")

passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
        print("ok - " + what)
    else:
        failed += 1
        print("not ok - " + what)


def custom(key):
    return key.startswith("x_") or key.startswith("X_")


def is_term(s):
    """A name: 2+ characters, no slash, backslash, control or space."""
    return isinstance(s, str) and len(s) >= 2 and not re.search(r"[/\\\s\x00-\x1f\x7f]", s)


def is_version_range(v):
    if v == 0 or v == "0":
        return True
    if not isinstance(v, str):
        return False
    return all((m := RANGE_OP.match(part)) and SEMVER.match(m.group(2))
               for part in v.split(","))


def is_url(u):
    return isinstance(u, str) and re.match(r"^[a-z][a-z0-9+.-]*://\S+$", u) is not None


def main():
    path = sys.argv[1]
    root = os.path.dirname(os.path.abspath(path))
    try:
        meta = json.load(open(path))
    except (OSError, ValueError) as e:
        check(False, f"{path} parses as JSON: {e}")
        return finish()
    check(isinstance(meta, dict), "META.json is an object")
    for key in REQUIRED:
        check(key in meta, f"required field {key}")
    for key in meta:
        check(key in TOP or custom(key), f"field {key} is defined by the spec (or x_ custom)")

    ms = meta.get("meta-spec", {})
    check(isinstance(ms, dict) and ms.get("version") == "1.0.0", "meta-spec.version is 1.0.0")
    check("url" not in ms or is_url(ms["url"]), "meta-spec.url is a URL")
    check(is_term(meta.get("name")), "name is a term")
    check(isinstance(meta.get("abstract"), str) and meta["abstract"].strip() != "", "abstract is a non-empty string")
    check("description" not in meta or isinstance(meta["description"], str), "description is a string")
    check(isinstance(meta.get("version"), str) and SEMVER.match(meta["version"]) is not None,
          f"version {meta.get('version')!r} is a semantic version")
    m = meta.get("maintainer")
    check(isinstance(m, str) and m.strip() != "" or
          isinstance(m, list) and len(m) > 0 and all(isinstance(x, str) and x.strip() for x in m),
          "maintainer is a string or a list of strings")
    lic = meta.get("license")
    check(isinstance(lic, str) and lic in LICENSES or
          isinstance(lic, list) and len(lic) > 0 and all(x in LICENSES for x in lic) or
          isinstance(lic, dict) and len(lic) > 0 and all(is_url(u) for u in lic.values()),
          f"license {lic!r} is a known license string, a list of them, or names with URLs")

    prov = meta.get("provides")
    check(isinstance(prov, dict) and len(prov) > 0, "provides names at least one extension")
    for ext, spec in (prov or {}).items():
        check(is_term(ext), f"provides.{ext}: the name is a term")
        check(isinstance(spec, dict), f"provides.{ext} is an object")
        if not isinstance(spec, dict):
            continue
        for key in spec:
            check(key in {"file", "version", "abstract", "docfile"} or custom(key),
                  f"provides.{ext}.{key} is defined by the spec")
        check(isinstance(spec.get("file"), str), f"provides.{ext}.file is given")
        check(isinstance(spec.get("file"), str) and os.path.isfile(os.path.join(root, spec["file"])),
              f"provides.{ext}.file {spec.get('file')} exists")
        if "docfile" in spec:
            check(os.path.isfile(os.path.join(root, spec["docfile"])),
                  f"provides.{ext}.docfile {spec['docfile']} exists")
        v = spec.get("version")
        check(isinstance(v, str) and SEMVER.match(v) is not None, f"provides.{ext}.version {v!r} is a semantic version")
        control = os.path.join(root, ext + ".control")
        if os.path.isfile(control) and isinstance(v, str):
            dv = re.search(r"^\s*default_version\s*=\s*'([^']*)'", open(control).read(), re.M)
            check(dv is not None and ".".join(v.split(".")[:2]) == dv.group(1)
                  and v.split(".")[2] == "0" or dv is not None and v == dv.group(1),
                  f"provides.{ext}.version {v} is the control file's default_version "
                  f"{dv.group(1) if dv else None}")

    for phase, rels in meta.get("prereqs", {}).items():
        check(phase in PHASES or custom(phase), f"prereqs.{phase} is a phase")
        for rel, deps in rels.items():
            check(rel in RELATIONS or custom(rel), f"prereqs.{phase}.{rel} is a relationship")
            for name, ver in deps.items():
                check(is_version_range(ver), f"prereqs.{phase}.{rel}.{name} {ver!r} is a version range")

    if "release_status" in meta:
        check(meta["release_status"] in {"stable", "testing", "unstable"}, "release_status is stable, testing or unstable")
    if "generated_by" in meta:
        check(isinstance(meta["generated_by"], str), "generated_by is a string")
    if "tags" in meta:
        t = meta["tags"]
        check(isinstance(t, list) and all(isinstance(x, str) and 0 < len(x) <= 255 for x in t),
              "tags are strings of 1 to 255 characters")
    if "no_index" in meta:
        ni = meta["no_index"]
        check(isinstance(ni, dict) and all(k in {"file", "directory"} or custom(k) for k in ni)
              and all(isinstance(v, list) and all(isinstance(x, str) for x in v) for v in ni.values()),
              "no_index has lists of files and directories")
    if "resources" in meta:
        r = meta["resources"]
        ok = isinstance(r, dict)
        for k, v in (r if ok else {}).items():
            if k == "homepage":
                ok = ok and is_url(v)
            elif k == "bugtracker":
                ok = ok and isinstance(v, dict) and ("web" not in v or is_url(v["web"]))
            elif k == "repository":
                ok = ok and isinstance(v, dict) and ("url" not in v or is_url(v["url"])) \
                    and ("web" not in v or is_url(v["web"]))
            else:
                ok = ok and custom(k)
        check(ok, "resources has homepage, bugtracker and repository in their forms")
    return finish()


def finish():
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
