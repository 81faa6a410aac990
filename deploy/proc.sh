# Process helpers shared by local-cluster.sh and netns-cluster.sh (sourced).

# True while process $1 runs. A zombie counts as stopped: a daemon started
# with setsid by an `up` that has since exited is reaped by init, and some
# inits (container ones) reap only every second or two; kill -0 succeeds on
# a zombie, so waiting on it made `down` take ~2 s per daemon that had
# exited in milliseconds.
proc_running() {
  local state
  state=$(sed -n 's/^[0-9]* (.*) \([A-Za-z]\) .*/\1/p' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n $state && $state != Z ]]
}

# Stops process $2 (named $1 in messages): SIGTERM, then SIGKILL when it is
# still running 10 s later. Prints "stopped NAME (pid PID)".
proc_stop() {
  local name=$1 pid=$2 i
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 500; i++)); do
    proc_running "$pid" || break
    sleep 0.02
  done
  if proc_running "$pid"; then
    echo "$name (pid $pid) ignored SIGTERM for 10 s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  echo "stopped $name (pid $pid)"
}
