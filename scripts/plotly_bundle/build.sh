#!/usr/bin/env bash
# Builds static/plotly-lens-<version>.min.js: plotly.js's core (which has scatter) with only the other trace
# types the app draws, for the page to load instead of the full 4.8 MB bundle (ui/plotly_js.py, static/README.md).
# Needs node and npm (the package registry); not part of the app's or the tests' setup: the result is committed.
# Usage: scripts/plotly_bundle/build.sh   (then commit static/plotly-lens-<version>.min.js)
#
# Why a bundle of our own and not plotly.js's cartesian one (box, violin, histograms, contours, pie, image,
# ternary, world calendars besides): in headless Chromium on the 2-core machine this one loads in 0.13 s and
# draws its first plots by 0.34 s, the cartesian one 0.44 s and 0.59 s (python -m benchmarks.plotly_load;
# benchmarks/REPORT.md, "thirty-third").
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
TRACES="bar heatmap"  # besides scatter, which is in plotly.js's core; ui/plotly_js.py reads them from the banner

npm ci --no-audit --no-fund --loglevel=error
version="$(node -p "require('plotly.js/package.json').version")"
{
  echo "'use strict';"
  echo "var Plotly = require('plotly.js/lib/core');"
  echo "Plotly.register(["
  for trace in $TRACES; do echo "  require('plotly.js/lib/$trace'),"; done
  echo "]);"
  echo "module.exports = Plotly;"
} > entry.js
types="$(printf '%s\n' scatter $TRACES | sort | tr '\n' ' ' | sed 's/ $//')"
out="$here/../../static/plotly-lens-$version.min.js"
node_modules/.bin/esbuild entry.js --bundle --minify --format=iife --global-name=Plotly --target=es2016 \
  --define:global=window --define:define.amd=false --alias:stream=stream-browserify --loader:.css=empty \
  --banner:js="/*! plotly.js (lens: $types - minified) v$version | MIT license, static/LICENSE-plotly.js.txt | built by scripts/plotly_bundle/build.sh */" \
  --log-level=warning --outfile="$out"
rm entry.js
echo "built $(basename "$out"): $(wc -c < "$out") bytes, trace types: $types"
