# /etc/profile.d/mjf.sh - Machine/Job Features for a PBS job whose directory a classic
# mom_priv/prologue wrote (Torque; OpenPBS without the hook): a prologue cannot set the
# job's environment, so the job's login shell asks for the variables. Outside a PBS job
# (no PBS_JOBID), or where they are set already (the hook set them), it does nothing.
# Replace /usr/bin with where mjf-pbs is installed.
if [ -n "${PBS_JOBID:-}" ] && [ -z "${JOBFEATURES:-}" ] && [ -x /usr/bin/mjf-pbs ]; then
    eval "$(/usr/bin/mjf-pbs profile 2>/dev/null)"
fi
