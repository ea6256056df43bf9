#!/usr/bin/env python3
"""Builds the eval corpus (tests/data/eval/docs/) from public text on a
Debian machine with the Rust toolchain's docs; run once, and its output is
committed (every machine then measures the same text). See README.md.

Needs: /usr/share/common-licenses (base-files), groff, the Debian package
manpages-ja-dev unpacked at $MANPAGES_JA (default /tmp/manpages-ja-dev:
`apt-get download manpages-ja-dev && dpkg -x manpages-ja-dev_*.deb DIR`),
and the rust-docs component (`rustc --print sysroot`/share/doc/rust/html).

Writes docs/<lang>/<name>.txt, NOTICES-manpages.txt (each man
page's copyright and license comment, verbatim) and corpus.tsv (doc id,
language, path, source, license), all deterministic.
"""

import gzip
import html
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DOCS = os.path.join(HERE, "docs")
LICENSES = "/usr/share/common-licenses"
MANPAGES_JA = os.environ.get("MANPAGES_JA", "/tmp/manpages-ja-dev")

# English: license texts (verbatim copies are allowed by each).
EN_LICENSES = ["Apache-2.0", "GPL-3", "MPL-2.0", "LGPL-2.1", "Artistic", "BSD", "CC0-1.0", "GFDL-1.3"]
# English: rustc's error code index and Rust by Example (Apache-2.0 OR MIT).
EN_ERROR_CODES = ["E0004", "E0023", "E0061", "E0106", "E0277", "E0308", "E0369", "E0382", "E0384",
                  "E0425", "E0433", "E0499", "E0502", "E0505", "E0507", "E0515", "E0597", "E0599",
                  "E0614", "E0716"]
EN_RBE = ["std/box", "std/vec", "std/str", "std_misc/channels", "custom_types/enum",
          "conversion/from_into", "std/hash", "scope/borrow", "scope/lifetime", "fn/closures",
          "trait", "std/panic"]
# Japanese: Rust by Example's Japanese translation (other pages than the English ones).
JA_RBE = ["mod/visibility", "cargo/deps", "testing/unit_testing", "generics", "scope/raii",
          "scope/move", "unsafe", "macros", "error/result", "error/option_unwrap"]
# Japanese: JM project translations of man pages under BSD, MIT-style or
# public-domain notices (see NOTICES-manpages.txt).
JA_MAN = ["man2/lseek.2", "man2/truncate.2", "man2/readlink.2", "man2/socket.2", "man2/accept.2",
          "man2/send.2", "man2/recv.2", "man2/getpgid.2", "man3/fopen.3", "man3/stdio.3",
          "man3/stdin.3", "man3/fts.3", "man3/dbopen.3", "man3/btree.3", "man3/getnameinfo.3",
          "man3/backtrace.3", "man3/error.3", "man3/popen.3", "man3/scanf.3"]
JA_SEEDS = ["000_23c333604504c1bd.txt", "002_d1dd9a78ce7dea22.txt"]

# The man pages' license markers, as corpus.tsv names them.
PERMISSIVE = {
    "BSD_4_CLAUSE_UCB": "BSD-4-Clause-UC (its advertising clause rescinded by UC in 1999: BSD-3-Clause)",
    "BSD_3_CLAUSE_UCB": "BSD-3-Clause",
    "BSD_ONELINE_CDROM": "BSD (4.4BSD-Lite)",
    "PERMISSIVE_MISC": "MIT",
    "PUBLIC_DOMAIN": "public domain",
}


def rust_html():
    sysroot = subprocess.run(["rustc", "--print", "sysroot"], capture_output=True, text=True, check=True)
    return os.path.join(sysroot.stdout.strip(), "share/doc/rust/html")


def rust_version():
    out = subprocess.run(["rustc", "--version"], capture_output=True, text=True, check=True)
    return out.stdout.split()[1]


def html_main_text(path):
    """The text of a page's <main>: tags dropped, entities decoded, lines
    trimmed, runs of blank lines made one."""
    with open(path, encoding="utf-8") as f:
        s = f.read()
    main = s.split("<main>", 1)[1].split("</main>", 1)[0]
    # mdbook's hidden code lines and the playground's buttons are not text.
    main = re.sub(r'<span class="boring">.*?</span>', "", main, flags=re.S)
    main = re.sub(r"<(p|h[1-6]|li|pre|div|tr|blockquote)[ >]", lambda m: "\n" + m.group(0), main)
    text = html.unescape(re.sub(r"<[^>]+>", "", main))
    out, blank = [], False
    for line in text.splitlines():
        line = line.rstrip()
        if not line.strip():
            blank = bool(out)
            continue
        if blank:
            out.append("")
            blank = False
        out.append(line)
    return "\n".join(out).strip() + "\n"


def man_text(src):
    """A man page rendered by groff as plain UTF-8 text: one line per
    paragraph (a very long line length, no adjusting, no hyphenation), the
    running header and footer dropped, a blank line before each heading."""
    rendered = subprocess.run(
        ["groff", "-k", "-man", "-Tutf8", "-rLL=3000n", "-dAD=l", "-rHY=0", "-P-cbou"],
        input=src.encode(), capture_output=True, check=True).stdout.decode()
    lines = [l.rstrip() for l in rendered.splitlines()]
    lines = [l for l in lines if l.strip()]
    lines = lines[1:-1]  # running header and footer
    out = []
    for l in lines:
        heading = not l.startswith(" ")
        l = re.sub(r"(?<=\S)  +", " ", l.strip())
        if heading and out:
            out.append("")
        out.append(l)
    return "\n".join(out) + "\n"


def man_notice(src):
    """The leading roff comment block: copyright and license, verbatim."""
    out = []
    for line in src.splitlines():
        if line.startswith('.\\"'):
            out.append(line[3:].strip() if line[3:4] == " " else line[3:])
        elif out:
            break
    return "\n".join(out).strip() + "\n"


def write(lang, name, text):
    os.makedirs(os.path.join(DOCS, lang), exist_ok=True)
    path = os.path.join(DOCS, lang, name + ".txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return os.path.relpath(path, os.path.join(HERE, "../../.."))


def main():
    rows = []
    for n in EN_LICENSES:
        with open(os.path.join(LICENSES, n), encoding="utf-8") as f:
            text = f.read()
        rows.append(("en/" + n.lower(), "en", write("en", n.lower(), text),
                     f"{LICENSES}/{n} (Debian base-files)", "verbatim copying permitted by the text itself"))
    root = rust_html()
    docs_of = f"rust-docs {rust_version()}"
    for code in EN_ERROR_CODES:
        text = html_main_text(os.path.join(root, "error_codes", code + ".html"))
        rows.append(("en/rustc-" + code, "en", write("en", "rustc-" + code, text),
                     f"{docs_of}: html/error_codes/{code}.html", "Apache-2.0 OR MIT"))
    for page in EN_RBE:
        name = "rbe-" + page.replace("/", "-")
        text = html_main_text(os.path.join(root, "rust-by-example", page + ".html"))
        rows.append(("en/" + name, "en", write("en", name, text),
                     f"{docs_of}: html/rust-by-example/{page}.html", "Apache-2.0 OR MIT"))
    for seed in JA_SEEDS:
        rows.append(("ja/seed-" + seed.split("_")[0], "ja", "tests/data/seeds/" + seed,
                     "the project's seed document", "the project's own (Apache-2.0)"))
    for page in JA_RBE:
        name = "rbe-" + page.replace("/", "-")
        text = html_main_text(os.path.join(root, "rust-by-example/ja", page + ".html"))
        rows.append(("ja/" + name, "ja", write("ja", name, text),
                     f"{docs_of}: html/rust-by-example/ja/{page}.html", "Apache-2.0 OR MIT"))
    notices = []
    for page in JA_MAN:
        path = os.path.join(MANPAGES_JA, "usr/share/man/ja", page + ".gz")
        with gzip.open(path, "rt", encoding="utf-8") as f:
            src = f.read()
        lic = re.search(r"LICENSE_START\(([A-Z_0-9]+)\)", src)
        if not lic or lic.group(1) not in PERMISSIVE:
            sys.exit(f"{page}: not under a permissive notice")
        name = "man-" + os.path.basename(page).replace(".", "")
        text = man_text(src)
        rows.append(("ja/" + name, "ja", write("ja", name, text),
                     f"manpages-ja-dev 0.5.0.0.20221215+dfsg-1: usr/share/man/ja/{page}.gz (rendered by groff)",
                     PERMISSIVE[lic.group(1)] + "; notice in NOTICES-manpages.txt"))
        notices.append(f"==== {page} ({name}.txt)\n{man_notice(src)}")
    with open(os.path.join(HERE, "NOTICES-manpages.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(notices))
    with open(os.path.join(HERE, "corpus.tsv"), "w", encoding="utf-8") as f:
        f.write("doc_id\tlang\tpath\tsource\tlicense\n")
        for r in rows:
            f.write("\t".join(r) + "\n")


if __name__ == "__main__":
    main()
