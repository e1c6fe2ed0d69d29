# Shell helpers for scripts that run a bundled target in the background with `ditto serve`.
# Source it, then: serve_start SPEC [PORT] (sets SERVE_PID and TARGET_PID), serve_stop.
# Needs $DITTO (the ditto binary). serve_stop is safe to call twice; put it in an EXIT trap.

SERVE_PID=""
TARGET_PID=""

serve_start() {
  local spec=$1 port=${2:-} fifo line
  fifo=$(mktemp -u); mkfifo "$fifo"
  if [ -n "$port" ]; then
    "$DITTO" serve --target "$spec" --port "$port" >"$fifo" &
  else
    "$DITTO" serve --target "$spec" >"$fifo" &
  fi
  SERVE_PID=$!
  read -r line <"$fifo" || true
  rm -f "$fifo"
  TARGET_PID=$(sed -n 's/^pid=\([0-9]*\).*/\1/p' <<<"$line")
  if [ -z "$TARGET_PID" ]; then
    echo "$(basename "$spec" .toml) did not start (see the error above)" >&2
    return 1
  fi
}

serve_stop() {
  if [ -n "$SERVE_PID" ]; then
    kill -TERM "$SERVE_PID" 2>/dev/null || true
    wait "$SERVE_PID" 2>/dev/null || true
    SERVE_PID=""
  fi
}
