#!/bin/bash
# A USER_JOB_WRAPPER written the way existing shell MJF wrappers are: one grep/awk
# per ClassAd attribute, echo into files, exec the job. Not part of the product: the
# benchmark's reference for "a shell script doing the same job". It validates
# nothing and writes non-atomically, as those scripts do.
ad_value() { grep -i "^$1 = " "$2" | head -n 1 | awk -F' = ' '{print $2}' | tr -d '"'; }
dir=$_CONDOR_SCRATCH_DIR/.mjf/jobs/job/jobfeatures
mkdir -p "$dir" "$_CONDOR_SCRATCH_DIR/.mjf/machinefeatures"
echo -n "$(grep -c ^processor /proc/cpuinfo)" > "$_CONDOR_SCRATCH_DIR/.mjf/machinefeatures/total_cpu"
echo -n "$(ad_value GlobalJobId "$_CONDOR_JOB_AD")" > "$dir/job_id"
echo -n "$(ad_value JobCurrentStartDate "$_CONDOR_JOB_AD")" > "$dir/jobstart_secs"
echo -n "$(ad_value Cpus "$_CONDOR_MACHINE_AD")" > "$dir/allocated_cpu"
echo -n "$(( $(ad_value Memory "$_CONDOR_MACHINE_AD") * 1048576 ))" > "$dir/max_rss_bytes"
echo -n "$(( $(ad_value Disk "$_CONDOR_MACHINE_AD") * 1024 ))" > "$dir/scratch_limit_bytes"
echo -n "$(ad_value AllowedJobDuration "$_CONDOR_JOB_AD")" > "$dir/wall_limit_secs"
export MACHINEFEATURES=$_CONDOR_SCRATCH_DIR/.mjf/machinefeatures JOBFEATURES=$dir
exec "$@"
