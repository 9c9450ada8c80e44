#!/usr/bin/env bash
# System packages the tests need beyond Python: headless Chromium (tests/test_browser.py) and
# poppler-utils' pdftoppm (comparison with the published PDFs). Run by `make test`.
# Installs them with apt-get when they are missing and this user may (root, or sudo without a
# password); otherwise says what to install and lets the tests report what they could not do.
set -uo pipefail

missing=()
# (GitHub's Ubuntu runners ship Google Chrome, which the browser tests use as well; there the apt
# package chromium is only a stub for a snap.)
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
    || command -v google-chrome >/dev/null 2>&1 || missing+=(chromium)
command -v pdftoppm >/dev/null 2>&1 || missing+=(poppler-utils)
((${#missing[@]})) || exit 0

if ! command -v apt-get >/dev/null 2>&1; then
    echo "system-deps: please install ${missing[*]} with your package manager (no apt-get here)" >&2
    exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo="sudo -n"
    else
        echo "system-deps: please run: sudo apt-get install ${missing[*]}" >&2
        exit 0
    fi
fi
echo "system-deps: installing ${missing[*]} with apt-get"
$sudo apt-get update -qq && \
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || echo "system-deps: apt-get could not install ${missing[*]}; the tests that need them will say so" >&2
exit 0
