#!/bin/bash
# pbs-up.sh -- from nothing to a finished OpenPBS job on Debian 12 (bookworm), run as root.
#   Source: openpbs/openpbs tag v23.06.06 (+2 upstream fixes needed for Python 3.11).
#   Installs to /opt/pbs, PBS_HOME=/var/spool/pbs, config /etc/pbs.conf.
#   The source (git archive --prefix=openpbs/ v23.06.06) and the two patches lie beside this
#   script; the build happens in $W (default /srv/openpbs-build); `build` is skipped when
#   /opt/pbs already holds an install of this version (cache it between runs).
# Usage: pbs-up.sh [all|deps|build|start|job]   (default: all)
set -euo pipefail
SRC=$(cd "$(dirname "$0")" && pwd)
W=${W:-/srv/openpbs-build}; mkdir -p "$W"
PREFIX=/opt/pbs
export PATH=/usr/sbin:/usr/bin:/sbin:/bin     # keep a pyenv/other python3 out of configure
export DEBIAN_FRONTEND=noninteractive
HOSTNAME_S=$(hostname -s)
TIMINGS=$W/timings.txt
t() {   # time a command, append to timings.txt
	local s e; s=$(date +%s.%N); "$@"; e=$(date +%s.%N)
	printf 'TIMING %7.1f s  %s\n' "$(echo "$e - $s" | bc)" "$*" | tee -a "$TIMINGS"
}
STEP=${1:-all}

# ---------------------------------------------------------------- 1. deps
apt_q() {   # apt-get with archive URLs masked in its output
	apt-get "$@" 2>&1 | sed -E 's#[a-z]+://[^ ]+#<archive>#g'; return "${PIPESTATUS[0]}"
}
deps() {
	PKGS="gcc g++ make libtool autoconf automake pkg-config libhwloc-dev libx11-dev libxt-dev
	      libedit-dev libical-dev libncurses-dev perl postgresql postgresql-contrib libpq-dev
	      postgresql-server-dev-all python3-dev tcl-dev tk-dev swig libexpat1-dev libssl-dev
	      libxext-dev libxft-dev sudo bc"
	t apt_q update -q
	t apt_q install -y -q --no-install-recommends $PKGS
}

# ---------------------------------------------------------------- 2. build
build() {
	if [ -x $PREFIX/bin/qsub ] && [ "$(cat $PREFIX/.mjf-built 2>/dev/null)" = v23.06.06+2 ]; then
		echo "OpenPBS already built in $PREFIX"; return 0
	fi
	# the tarball is checked before anything of it is unpacked or built as root
	(cd "$SRC" && sha256sum --quiet -c SHA256SUMS) || { echo "pbs-up.sh: openpbs-src.tar.gz does not match SHA256SUMS" >&2; return 1; }
	cd "$W"; rm -rf openpbs; tar xzf "$SRC/openpbs-src.tar.gz"; cd openpbs
	patch -p1 < "$SRC/0001-py311-eval-h.patch"        # upstream 1d17427c0: eval.h gone in Python 3.11
	patch -p1 < "$SRC/0002-py310-ssize-t-clean.patch"  # upstream dd2a24640: PY_SSIZE_T_CLEAN (pbs.logmsg in hooks)
	t ./autogen.sh > ../autogen.log 2>&1
	t ./configure --prefix=$PREFIX > ../configure.log 2>&1
	t make -j"$(nproc)" > ../make.log 2>&1
	t make install > ../make-install.log 2>&1
	echo v23.06.06+2 > $PREFIX/.mjf-built
	cd "$W"; rm -rf openpbs
}

# ---------------------------------------------------------------- 3. configure + start
# TPP (pbs_comm/mom/server) ignores 127.x addresses; if our hostname resolves to
# loopback (here: "127.0.0.1 vm" in /etc/hosts) the daemons die with
# "Could not find any usable IP address for host vm".  Instead of editing the
# shared /etc/hosts we start the daemons in a private mount namespace where a
# bind-mounted hosts file maps the hostname to the primary non-loopback IPv4.
# (In a CI container you own, simply put "$IP $(hostname)" first in /etc/hosts.)
pbs_start() {
	if getent ahostsv4 "$HOSTNAME_S" | awk '$1 !~ /^127\./{f=1} END{exit !f}'; then
		/opt/pbs/libexec/pbs_init.d start
	else
		IP=$(ip -4 -o addr show scope global | awk '{print $4}' | cut -d/ -f1 | head -1)
		printf '%s\t%s\n127.0.0.1\tlocalhost\n' "$IP" "$HOSTNAME_S" > "$W/hosts.pbs"
		unshare -m --propagation private sh -c \
			"mount --bind $W/hosts.pbs /etc/hosts && exec /opt/pbs/libexec/pbs_init.d start"
	fi
}
wait_node_free() {
	for _ in $(seq 1 240); do
		[ "$($PREFIX/bin/pbsnodes -a 2>/dev/null | awk '/^ *state =/{print $3; exit}')" = free ] && return 0
		sleep 0.25
	done
	echo "node never became free" >&2; return 1
}
start() {
	[ -f /etc/pbs.conf ] || $PREFIX/libexec/pbs_postinstall > "$W/postinstall.log" 2>&1
	sed -i -e "s/^PBS_SERVER=.*/PBS_SERVER=$HOSTNAME_S/" -e 's/^PBS_START_MOM=0/PBS_START_MOM=1/' /etc/pbs.conf
	chmod 4755 $PREFIX/sbin/pbs_iff $PREFIX/sbin/pbs_rcp
	t pbs_start > "$W/start.log" 2>&1
	t wait_node_free
	# clients outside the namespace connect from 127.0.0.1 ("localhost") while claiming
	# user@<hostname>: without flatuid the server answers "Bad UID for job execution".
	$PREFIX/bin/qmgr -c "set server flatuid = True"
	$PREFIX/bin/qmgr -c "set server job_history_enable = True"
	$PREFIX/bin/pbsnodes -a
}

# ---------------------------------------------------------------- 4. first job
job() {
	id pbsuser1 >/dev/null 2>&1 || useradd -m -s /bin/bash pbsuser1
	cd /home/pbsuser1
	s=$(date +%s.%N)
	J=$(runuser -u pbsuser1 -- $PREFIX/bin/qsub -N envjob -l select=1:ncpus=1:mem=200mb \
		-l walltime=00:05:00 -- /bin/env)
	until $PREFIX/bin/qstat -xf "$J" | grep 'job_state = F' >/dev/null; do sleep 0.1; done
	until [ -s envjob.o"${J%%.*}" ]; do sleep 0.1; done
	printf 'TIMING %7.1f s  submit->finished+output (%s)\n' "$(echo "$(date +%s.%N) - $s" | bc)" "$J" | tee -a "$TIMINGS"
	$PREFIX/bin/qstat -xf "$J" | grep -E 'Exit_status|exec_vnode'
	sort envjob.o"${J%%.*}"
}

case $STEP in
	all)   deps; build; start; job ;;
	deps)  deps ;;
	build) build ;;
	start) start ;;
	job)   job ;;
	*) echo "usage: $0 [all|deps|build|start|job]"; exit 2 ;;
esac
