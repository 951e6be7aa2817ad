"""The simulated node's session: the sshd ForceCommand that routes a session to its node, and
the in-shell `timeout` that runs a healthy simulated tool without a process."""

from __future__ import annotations

# sshd ForceCommand, sourced by the account's login shell (`bash -c '. dispatch'`), so a
# session costs no extra exec: route to the addressed node, then run what the client asked.
# A stage script (our LAUNCHER) runs under the real launcher, whose bash loads the node's
# healthy simulated tools as functions (fast.sh via BASH_ENV, fn/<tool>.sh): one process per
# session instead of two per command. Faulty tools, `sh -c` commands and anything else go
# through the real `timeout` and the PATH stubs.
DISPATCH = """# nodegate simulated fleet: route this SSH session to the addressed node.
set -- $SSH_CONNECTION
NG_NODE="{root}/by-addr/$3"
if [ ! -d "$NG_NODE" ]; then echo "nodegate-sim: no node at $3" >&2; exit 255; fi
export NG_NODE
if [ -r "$NG_NODE/slow" ]; then read -r ng_s < "$NG_NODE/slow"; sleep "$ng_s"; fi
PATH="$NG_NODE/bin:{root}/bin:{host_path}"
export PATH
ng_stage=
if [ "${{SSH_ORIGINAL_COMMAND:-}}" = {launcher} ]; then
  # The real launcher runs, as on a real node (it reads the whole script, then runs it); its
  # bash loads the node's healthy tools as functions first (BASH_ENV, unset there).
  ng_stage=1
  export BASH_ENV="$NG_NODE/fast.sh"
fi
# drop_after: kill this connection's sshd session process (our parent) later, as a cut
# network or a crashed sshd would end it; only if that PID is still an sshd.
if [ -z "$ng_stage" ] && [ -r "$NG_NODE/drop_after" ]; then
  read -r ng_d < "$NG_NODE/drop_after"; ng_c=$PPID
  (sleep "$ng_d"; read -r ng_n < "/proc/$ng_c/comm" && case $ng_n in sshd*) kill -9 "$ng_c" ;; esac
  ) </dev/null >/dev/null 2>&1 &
fi
eval "${{SSH_ORIGINAL_COMMAND:-exec /bin/sh -i}}"
exit $?
"""

# bash only: `timeout` runs a healthy simulated tool in-shell, everything else for real.
FAST_TIMEOUT = """timeout() {
  local -a ng_args=("$@")
  local ng_j=0
  while [ $ng_j -lt $# ]; do
    case ${ng_args[ng_j]} in
      -k|-s) ng_j=$((ng_j + 2)) ;;
      -*) ng_j=$((ng_j + 1)) ;;
      *) break ;;
    esac
  done
  if [ $((ng_j + 1)) -lt $# ]; then
    local ng_tool=${ng_args[ng_j+1]}
    local ng_fn="ngsim_${ng_tool//-/_}"
    # Each tool's function is parsed only when used: all tools of all stages would be
    # hundreds of KB of shell to parse on every session.
    if ! declare -F "$ng_fn" >/dev/null && [ -r "$NG_NODE/fn/$ng_tool.sh" ]; then
      . "$NG_NODE/fn/$ng_tool.sh"
    fi
    if declare -F "$ng_fn" >/dev/null; then
      "$ng_fn" "${ng_args[@]:ng_j+2}"
      return
    fi
  fi
  command timeout "$@"
}
"""
