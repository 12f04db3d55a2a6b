#!/usr/bin/env bash
# Make sure a Docker engine answers. On a Debian host, as root, install one (docker.io) when missing,
# together with mmdebstrap (which builds the node image's base when no registry is reachable), and
# start dockerd in the background. Elsewhere, say what to do. Used by `make engine`.
set -uo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LAB_HOME="${LAB_HOME:-$REPO_ROOT/.lab}"
LOG="$LAB_HOME/logs/dockerd.log"
WAIT_SECONDS=60

engine_answers() {
    command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1
}

if engine_answers; then
    echo "Docker engine is up (server $(docker version --format '{{.Server.Version}}' 2>/dev/null))"
    exit 0
fi

os_id="$( . /etc/os-release 2>/dev/null && echo "${ID:-}")"
if [[ "$(uname -s)" == Darwin ]]; then
    echo "no Docker engine answers: start Docker Desktop (install it first if it is missing), then run this again" >&2
    exit 1
elif [[ "$os_id" != debian ]]; then
    echo "no Docker engine answers: install Docker Engine with your distribution's packages, start it" \
         "(e.g. \`sudo systemctl start docker\`), then run this again" >&2
    exit 1
elif [[ "$(id -u)" != 0 ]]; then
    if command -v docker >/dev/null 2>&1 && docker info 2>&1 | grep -qi "permission denied"; then
        echo "a Docker engine runs but refuses you: add yourself to the docker group" \
             "(\`sudo usermod -aG docker $USER\`, then log in again), or run as root" >&2
    else
        echo "no Docker engine answers: run \`sudo make engine\` to install and start one as root," \
             "or start Docker yourself (\`sudo systemctl start docker\`)" >&2
    fi
    exit 1
fi

missing=()
{ command -v dockerd && command -v docker; } >/dev/null 2>&1 || missing+=(docker.io)
command -v mmdebstrap >/dev/null 2>&1 || command -v debootstrap >/dev/null 2>&1 || missing+=(mmdebstrap)
if ((${#missing[@]})); then
    echo "installing ${missing[*]} with apt-get"
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" || {
        echo "apt-get could not install ${missing[*]}: see its output above" >&2
        exit 1
    }
fi

mkdir -p "$(dirname "$LOG")"
if pgrep -x dockerd >/dev/null 2>&1; then
    echo "dockerd is running but does not answer yet; waiting up to ${WAIT_SECONDS} s"
    dockerd_pid=""
else
    echo "starting dockerd (log: $LOG)"
    setsid --wait nohup dockerd >>"$LOG" 2>&1 </dev/null &
    dockerd_pid=$!
fi

for ((second = 0; second < WAIT_SECONDS; second++)); do
    if engine_answers; then
        echo "Docker engine is up; dockerd logs to $LOG"
        exit 0
    fi
    if [[ -n "$dockerd_pid" ]] && ! kill -0 "$dockerd_pid" 2>/dev/null; then
        echo "dockerd exited during start-up" >&2
        break
    fi
    sleep 1
done

echo "no Docker engine answers after starting dockerd; last lines of $LOG:" >&2
tail -n 20 "$LOG" >&2
exit 1
