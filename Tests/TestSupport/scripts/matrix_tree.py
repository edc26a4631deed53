#!/usr/bin/env python3
"""Builds the works-with matrix's content in DIR: what every client fetches through pinproxy.

  DIR/hello.txt                      curl, wget, urllib, requests, Go, Node
  DIR/simple/tinypkg/index.html      a PEP 503 index page for pip, linking
  DIR/packages/tinypkg-1.0-py3-none-any.whl
  DIR/repo.git                       a bare repository prepared for dumb HTTP (update-server-info)
  DIR/apt/{Packages,Release,tinypkg_1.0_all.deb}   a flat apt repository

Prints 'OK' when done.
"""
import hashlib, os, subprocess, sys, zipfile

root = sys.argv[1]
os.makedirs(root, exist_ok=True)
with open(os.path.join(root, "hello.txt"), "w") as f:
    f.write("hello through pinproxy\n")

def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()

# A minimal wheel: pip download checks its name and metadata, never installs it.
os.makedirs(os.path.join(root, "packages"), exist_ok=True)
wheel = os.path.join(root, "packages", "tinypkg-1.0-py3-none-any.whl")
with zipfile.ZipFile(wheel, "w") as z:
    files = {
        "tinypkg/__init__.py": "VALUE = 1\n",
        "tinypkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
        "tinypkg-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: pinproxy-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    for name, text in files.items():
        z.writestr(name, text)
    z.writestr("tinypkg-1.0.dist-info/RECORD", "".join("%s,,\n" % n for n in files) + "tinypkg-1.0.dist-info/RECORD,,\n")
os.makedirs(os.path.join(root, "simple", "tinypkg"), exist_ok=True)
with open(os.path.join(root, "simple", "index.html"), "w") as f:
    f.write('<!DOCTYPE html><html><body><a href="tinypkg/">tinypkg</a></body></html>\n')
with open(os.path.join(root, "simple", "tinypkg", "index.html"), "w") as f:
    f.write('<!DOCTYPE html><html><body><a href="../../packages/tinypkg-1.0-py3-none-any.whl#sha256=%s">tinypkg-1.0-py3-none-any.whl</a></body></html>\n' % sha256(wheel))

# A bare repository served as files: git falls back to the dumb protocol.
env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", HOME=root, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
           GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
work = os.path.join(root, "work")
def git(*args, cwd=None):
    subprocess.run(["git"] + list(args), cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
git("init", "-q", "-b", "main", work)
with open(os.path.join(work, "README"), "w") as f:
    f.write("cloned through pinproxy\n")
git("add", "README", cwd=work)
git("commit", "-q", "-m", "first", cwd=work)
git("clone", "-q", "--bare", work, os.path.join(root, "repo.git"))
git("update-server-info", cwd=os.path.join(root, "repo.git"))

# A flat apt repository with one package; [trusted=yes] on the client side, so no signature.
pkg = os.path.join(root, "debbuild")
os.makedirs(os.path.join(pkg, "DEBIAN"), exist_ok=True)
os.makedirs(os.path.join(pkg, "usr", "share", "doc", "tinypkg"), exist_ok=True)
with open(os.path.join(pkg, "DEBIAN", "control"), "w") as f:
    f.write("Package: tinypkg\nVersion: 1.0\nArchitecture: all\nMaintainer: pinproxy tests <t@t>\nDescription: works-with matrix package\n")
with open(os.path.join(pkg, "usr", "share", "doc", "tinypkg", "README"), "w") as f:
    f.write("fetched through pinproxy\n")
aptdir = os.path.join(root, "apt")
os.makedirs(aptdir, exist_ok=True)
deb = os.path.join(aptdir, "tinypkg_1.0_all.deb")
subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", pkg, deb], check=True, stdout=subprocess.DEVNULL, timeout=60)
control = open(os.path.join(pkg, "DEBIAN", "control")).read().strip()
packages = "%s\nFilename: ./tinypkg_1.0_all.deb\nSize: %d\nSHA256: %s\n\n" % (control, os.path.getsize(deb), sha256(deb))
with open(os.path.join(aptdir, "Packages"), "w") as f:
    f.write(packages)
with open(os.path.join(aptdir, "Release"), "w") as f:
    f.write("Origin: pinproxy-tests\nLabel: pinproxy-tests\nSuite: tests\nCodename: tests\nDate: Thu, 01 Jan 2026 00:00:00 UTC\n"
            "Architectures: all\nSHA256:\n %s %d Packages\n" % (sha256(os.path.join(aptdir, "Packages")), len(packages.encode())))
print("OK")
