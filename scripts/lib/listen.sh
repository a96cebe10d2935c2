# Sourced by the soft-RoCE benchmarks: waits until a server listens on a TCP port.

# Waits (up to 60 s) until process $2 listens on TCP port $1; false if it died first.
await_listen() { # port pid
  local waited=0
  until ss -ltn 2>/dev/null | awk '{print $4}' | grep -qE "[:.]$1\$"; do
    if ! kill -0 "$2" 2>/dev/null || [ "$waited" -ge 600 ]; then
      wait "$2" 2>/dev/null || true
      return 1
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
}
