#!/bin/sh
# Start munge and Slurm in a lab node (run by `lab up` in every started node; safe to run again):
# munged with the lab's key, slurmctld on the controller slurm.conf names, slurmd everywhere.
# Nodes run without CAP_CHOWN, so the munge user writes its own copy of the key (0400, owned by munge).
set -eu
rm -f /etc/munge/munge.key
runuser -u munge -- sh -c 'umask 0277 && cat > /etc/munge/munge.key' < /etc/lab/munge.key
pgrep -x munged > /dev/null || runuser -u munge -- /usr/sbin/munged
controller=$(sed -n 's/^SlurmctldHost=\([A-Za-z0-9_.-]*\).*/\1/p' /etc/slurm/slurm.conf)
if [ "$(hostname)" = "$controller" ]; then
    pgrep -x slurmctld > /dev/null || slurmctld
fi
pgrep -x slurmd > /dev/null || slurmd
