#!/bin/sh
# Stands in for zerofs in the hooks `zerofs hooks install AGENT --zerofs
# keep-stdin.sh` writes: appends each hook's stdin, one JSON object a line,
# to $ZEROFS_CAPTURE (default ./captured.jsonl), and answers {} to the
# agents that read an answer.
out=${ZEROFS_CAPTURE:-$PWD/captured.jsonl}
cat >> "$out"
echo >> "$out"
case "$*" in *gemini*|*cursor*) echo '{}' ;; esac
