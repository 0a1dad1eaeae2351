#!/bin/bash
# The official OpenAI and Anthropic Python SDKs, whose request and response types
# the Meta API tests check every request and fake reply against
# (testdata/meta-sdk/check.py). Installed from PyPI when missing.
set -euo pipefail
if python3 -c 'import openai, anthropic, pydantic' 2>/dev/null; then
    exit 0
fi
command -v python3 >/dev/null || { echo "setup-meta-sdk: python3 is missing (Debian: apt-get install python3 python3-pip)" >&2; exit 1; }
python3 -m pip install --quiet --break-system-packages openai anthropic
