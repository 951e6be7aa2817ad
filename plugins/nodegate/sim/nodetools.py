"""The shell of a simulated node's view of host tools: its `cat`, `grep` and `pgrep`.

POSIX sh shared by the PATH stubs (dash) and the fast path (bash), globals prefixed `ng_`,
builtins only but for the one real tool each runs; behaviour in sim/nodefs.py. `lib-cat.sh`
is `cat` alone: a stage that only cats files (reach) parses a few dozen lines per session,
not the whole library (`lib.sh`), which the rest loads on first use.
"""

from __future__ import annotations

import shlex
from pathlib import Path

# What the dispatcher's PATH holds after the fleet's own bin directories.
HOST_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
# The link in a node's directory to its root: grep names the node's files through it, and
# dropping this byte (one text files never hold) from what grep prints leaves `/sys/...`.
MARK = "\x01"

LIB_CAT = r"""# nodegate simulated fleet: a node's cat (see nodegate/sim/nodefs.py, nodetools.py).
: "${NG_HOST_PATH:=@HOST_PATH@}"
NGSIM_NL='
'
ngsim__tick() {
  # A read of the node's /sys: its climbing counters advance.
  if [ -r "$NG_NODE/climb.sh" ]; then . "$NG_NODE/climb.sh"; fi
}

ngsim__climb() {
  if read -r ng_v < "$NG_NODE/root/$1"; then
    printf '%s\n' $((ng_v + $2)) > "$NG_NODE/root/$1"
  fi
}

ngsim_node_cat() {
  # cat over the node's files: plain operands with builtins, anything else the host's cat.
  ng_n=$# ng_opts=1 ng_plain=1 ng_rooted=0 ng_sys=0 ng_ifs=$IFS
  [ $# -gt 0 ] || ng_plain=0
  for ng_a do
    if [ $ng_opts = 1 ]; then
      case $ng_a in
        --) ng_opts=0; ng_plain=0; set -- "$@" "$ng_a"; continue ;;
        -?*) ng_plain=0; set -- "$@" "$ng_a"; continue ;;
        -) ng_plain=0 ;;
      esac
    fi
    case $ng_a in
      /*)
        ng_rooted=1
        case $ng_a in /sys|/sys/*) ng_sys=1 ;; esac
        IFS=; set -- "$@" "$NG_NODE/root"$ng_a; IFS=$ng_ifs ;;
      *) set -- "$@" "$ng_a" ;;
    esac
  done
  shift $ng_n
  ng_rc=0
  if [ $ng_plain = 0 ]; then
    if [ $ng_rooted = 0 ]; then (PATH=$NG_HOST_PATH; exec cat "$@"); return; fi
    command -v ngsim__host_run >/dev/null 2>&1 || . "${NG_NODE%/by-addr/*}/lib.sh"
    ngsim__host_run ngsim__unroot cat "$@"
    ng_rc=$?
  else
    for ng_f do
      if [ -f "$ng_f" ]; then
        while IFS= read -r ng_l; do printf '%s\n' "$ng_l"; done < "$ng_f"
        [ -z "$ng_l" ] || printf '%s' "$ng_l"
      elif [ -d "$ng_f" ]; then
        echo "cat: ${ng_f#"$NG_NODE/root"}: Is a directory" >&2; ng_rc=1
      else
        echo "cat: ${ng_f#"$NG_NODE/root"}: No such file or directory" >&2; ng_rc=1
      fi
    done
  fi
  [ $ng_sys = 0 ] || ngsim__tick
  return $ng_rc
}
""".replace("@HOST_PATH@", HOST_PATH)

LIB_REST = r"""# nodegate simulated fleet: a node's grep and pgrep (see nodegate/sim/nodefs.py).
# The link $NG_NODE/<this byte> -> root: the node's paths as grep prints them, marked.
NGSIM_MARK='@MARK@'
# GNU grep 3.x long options; `=` marks those taking an argument.
NGSIM_GREP_LONG='after-context= basic-regexp before-context= binary binary-files= byte-offset
color colour context= count dereference-recursive devices= directories= exclude= exclude-dir=
exclude-from= extended-regexp file= files-with-matches files-without-match fixed-strings
group-separator= help ignore-case include= initial-tab invert-match label= line-buffered
line-number line-regexp max-count= no-filename no-group-separator no-ignore-case no-messages
null null-data only-matching perl-regexp quiet recursive regexp= silent text version
with-filename word-regexp'

ngsim__unroot() {
  # Print $1 as the node shows it: "$NG_NODE/root" removed at each line's start and after
  # "$2: " (the tool's own messages).
  [ -n "$1" ] || return 0
  ng_r=$NG_NODE/root
  case $1 in *"$ng_r"*) ;; *) printf '%s\n' "$1"; return 0 ;; esac
  ng_ifs=$IFS; IFS=$NGSIM_NL
  case $- in *f*) ng_nf=1 ;; *) ng_nf=0; set -f ;; esac
  for ng_l in $1; do
    case $ng_l in
      "$ng_r"*) ng_l=${ng_l#"$ng_r"} ;;
      "$2: $ng_r"*) ng_l="$2: ${ng_l#"$2: $ng_r"}" ;;
    esac
    printf '%s\n' "$ng_l"
  done
  IFS=$ng_ifs
  [ $ng_nf = 1 ] || set +f
}

ngsim__host_run() {
  # $1 FIX, then the host's real tool "$@" on mapped operands; what it prints passes
  # through FIX (ngsim__unroot or ngsim__unmark) to show the paths as the node names them.
  ng_fix=$1; shift; ng_t=$1
  if [ /dev/stderr -ef /dev/null ]; then  # `2>/dev/null`: no messages to rewrite
    ng_out=$(PATH=$NG_HOST_PATH; exec "$@" 2>/dev/null); ng_rc=$?
    $ng_fix "$ng_out" "$ng_t"
    return $ng_rc
  fi
  { ng_err=$( { ng_out=$(PATH=$NG_HOST_PATH; exec "$@"); ng_rc=$?
                $ng_fix "$ng_out" "$ng_t" >&3; exit $ng_rc; } 2>&1 )
    ng_rc=$?; } 3>&1
  $ng_fix "$ng_err" "$ng_t" >&2
  return $ng_rc
}

ngsim__unmark() {
  # Print $1 without the marker bytes that precede the node's paths (one builtin call).
  [ -n "$1" ] || return 0
  case $1 in *"$NGSIM_MARK"*) ;; *) printf '%s\n' "$1"; return 0 ;; esac
  ng_ifs=$IFS; IFS=$NGSIM_MARK
  case $- in *f*) ng_nf=1 ;; *) ng_nf=0; set -f ;; esac
  printf '%s' $1
  printf '\n'
  IFS=$ng_ifs
  [ $ng_nf = 1 ] || set +f
}

ngsim__grep_opt() {
  # Classify grep argument $1 as grep's getopt_long would: ng_kind = end (--), operand,
  # opt (self-contained) or next (its argument is the next word); ng_key = e/f for a pattern
  # or pattern-file option, else x; ng_val = an attached argument, ng_head what precedes it;
  # ng_z = 1 for -z/-Z/--null/--null-data.
  ng_kind=opt ng_key=x ng_val= ng_head= ng_z=0
  case $1 in
    --) ng_kind=end ;;
    --*)
      ng_name=${1#--}; ng_name=${ng_name%%=*}
      ng_hit= ng_hits=0
      for ng_w in $NGSIM_GREP_LONG; do
        case $ng_w in
          "$ng_name"|"$ng_name=") ng_hit=$ng_w; ng_hits=1; break ;;
          "$ng_name"*) ng_hit=$ng_w; ng_hits=$((ng_hits + 1)) ;;
        esac
      done
      [ $ng_hits = 1 ] || return 0  # unknown or ambiguous: grep itself refuses it
      case $ng_hit in
        regexp=) ng_key=e ;; file=|exclude-from=) ng_key=f ;;
        null|null-data) ng_z=1 ;;
      esac
      case $1 in
        *=*) ng_head=${1%%=*}=; ng_val=${1#*=} ;;
        *) case $ng_hit in *=) ng_kind=next ;; esac ;;
      esac ;;
    -?*)
      ng_s=${1#-}
      while [ -n "$ng_s" ]; do
        ng_c=${ng_s%"${ng_s#?}"}; ng_s=${ng_s#?}
        case $ng_c in
          z|Z) ng_z=1 ;;
          [ABCDXdefm])
            case $ng_c in e) ng_key=e ;; f) ng_key=f ;; *) ng_key=x ;; esac
            if [ -z "$ng_s" ]; then ng_kind=next; else ng_head=${1%"$ng_s"}; ng_val=$ng_s; fi
            return 0 ;;
        esac
      done ;;
    *) ng_kind=operand ;;
  esac
}

ngsim_node_grep() {
  # GNU grep over the node's files: absolute operands (and -f files) mapped under its root.
  # Pass 1: do -e/-f give the pattern (then the first operand is a file too)? Any relative
  # file (the host's, from the session's directory)? Pass 2: the arguments grep runs with.
  ng_n=$# ng_pat=1 ng_opts=1 ng_next= ng_ops=0 ng_rel=0 ng_rel1=0
  for ng_a do
    if [ -n "$ng_next" ]; then
      case $ng_next$ng_a in f/*|f-) ;; f*) ng_rel=$((ng_rel + 1)) ;; esac
      ng_next=; continue
    fi
    if [ $ng_opts = 1 ]; then
      ngsim__grep_opt "$ng_a"
      case $ng_key in e|f) ng_pat=0 ;; esac
      case $ng_key$ng_val in f/*|f|f-) ;; f*) ng_rel=$((ng_rel + 1)) ;; esac
      case $ng_kind in
        end) ng_opts=0; continue ;;
        next) ng_next=$ng_key; continue ;;
        opt) continue ;;
      esac
    fi
    ng_ops=$((ng_ops + 1))
    case $ng_a in
      /*|-) ;;
      *) ng_rel=$((ng_rel + 1)); [ $ng_ops != 1 ] || ng_rel1=1 ;;
    esac
  done
  [ $ng_pat = 0 ] || { ng_ops=$((ng_ops - 1)); ng_rel=$((ng_rel - ng_rel1)); }
  if [ $ng_ops -le 0 ] || [ $ng_rel -gt 0 ]; then
    # No file (grep -r reads ".") or the host's relative files: paths from where we are.
    ng_pre=$NG_NODE/root ng_fix=ngsim__unroot ng_pwd=
  else
    # The node's files only: named from the node's directory through the marker link, so
    # dropping the marker bytes from the output restores the names as given.
    ng_pre=$NGSIM_MARK ng_fix=ngsim__unmark ng_pwd=$PWD
    cd "$NG_NODE" || return 2
  fi
  ng_opts=1 ng_next= ng_rooted=0 ng_sys=0 ng_nul=0 ng_ifs=$IFS
  for ng_a do
    if [ -n "$ng_next" ]; then
      case $ng_next$ng_a in f/*) ng_a=$ng_pre$ng_a; ng_rooted=1 ;; esac
      set -- "$@" "$ng_a"; ng_next=; continue
    fi
    if [ $ng_opts = 1 ]; then
      ngsim__grep_opt "$ng_a"
      [ $ng_z = 0 ] || ng_nul=1
      case $ng_kind in
        end) ng_opts=0; set -- "$@" "$ng_a"; continue ;;
        next) ng_next=$ng_key; set -- "$@" "$ng_a"; continue ;;
        opt)
          case $ng_key$ng_val in f/*) ng_a=$ng_head$ng_pre$ng_val; ng_rooted=1 ;; esac
          set -- "$@" "$ng_a"; continue ;;
      esac
    fi
    if [ $ng_pat = 1 ]; then ng_pat=0; set -- "$@" "$ng_a"; continue; fi
    case $ng_a in
      /*)
        ng_rooted=1
        case $ng_a in /sys|/sys/*) ng_sys=1 ;; esac
        # unquoted: a glob the host left literal expands under the node's root
        IFS=; set -- "$@" "$ng_pre"$ng_a; IFS=$ng_ifs ;;
      *) set -- "$@" "$ng_a" ;;
    esac
  done
  shift $ng_n
  if [ $ng_rooted = 0 ]; then
    ngsim__back; (PATH=$NG_HOST_PATH; exec grep "$@"); return
  fi
  if [ $ng_nul = 1 ]; then
    ngsim__back
    echo "grep: -z/-Z on a simulated node's files is not simulated (nodegate sim)" >&2
    return 2
  fi
  ngsim__host_run $ng_fix grep "$@"
  ng_rc=$?
  ngsim__back
  [ $ng_sys = 0 ] || ngsim__tick
  return $ng_rc
}

ngsim__back() {
  # Back to the session's directory (the fast path runs in the session's own shell).
  if [ -n "$ng_pwd" ]; then cd "$ng_pwd" || :; fi
}

ngsim_node_pgrep() {
  # procps pgrep over the node's own processes (NG_NODE in their environment): PIDs, -l, -a.
  for ng_a do
    case $ng_a in
      -c|--count|-d*|--delim*|-n|--newest|-o|--oldest|-w|--lightweight|-[!-]*[cdnow]*)
        echo "pgrep: $ng_a on a simulated node is not simulated (nodegate sim)" >&2
        return 2 ;;
    esac
  done
  ng_out=$(PATH=$NG_HOST_PATH; exec pgrep "$@")
  ng_rc=$?
  if [ $ng_rc != 0 ]; then [ -z "$ng_out" ] || printf '%s\n' "$ng_out"; return $ng_rc; fi
  ng_rc=1 ng_ifs=$IFS
  IFS=$NGSIM_NL
  case $- in *f*) ng_nf=1 ;; *) ng_nf=0; set -f ;; esac
  for ng_l in $ng_out; do
    if (PATH=$NG_HOST_PATH; exec grep -qzxF "NG_NODE=$NG_NODE" "/proc/${ng_l%% *}/environ") \
      2>/dev/null; then
      printf '%s\n' "$ng_l"; ng_rc=0
    fi
  done
  IFS=$ng_ifs
  [ $ng_nf = 1 ] || set +f
  return $ng_rc
}
""".replace("@MARK@", MARK)

LIB = LIB_CAT + "\n" + LIB_REST
# The node's tools, and the library each needs (file names in the fleet directory).
NODE_TOOLS = {"cat": "lib-cat.sh", "grep": "lib.sh", "pgrep": "lib.sh"}
LIBS = {"lib-cat.sh": LIB_CAT, "lib.sh": LIB}

# A PATH stub for a host tool seen through the node's view, shared by every node (a node's
# faulty tool of the same name shadows it).
NODE_TOOL_STUB = """#!/bin/sh
. {lib}
ngsim_node_{tool} "$@"
exit $?
"""


def node_tool_stub(root: Path, tool: str) -> str:
    return NODE_TOOL_STUB.format(lib=shlex.quote(str(root / NODE_TOOLS[tool])), tool=tool)


def fast_shim(root: Path, tool: str) -> str:
    """The fast path's `ngsim_<tool>`: loads its library on first use, then redefines itself."""
    lib = shlex.quote(str(root / NODE_TOOLS[tool]))
    return (
        f'ngsim_{tool}() {{ . {lib}; ngsim_{tool}() {{ ngsim_node_{tool} "$@"; }}; '
        f'ngsim_node_{tool} "$@"; }}\n'
    )


__all__ = ["HOST_PATH", "LIB", "LIBS", "MARK", "NODE_TOOLS", "fast_shim", "node_tool_stub"]
