"""Every scenario, in the order they run and their rows print: the start-up table's rows
follow this order (an Epilog after its Prolog, the LSF post-exec after the starter, the
Grid Engine starter between its prolog and epilog, so that every run starts from the
same state; with records kept, each end hook after the start that made the job's
directory, so that it has a job to record), then each scenario's own tables.

A scenario module not listed here would never run: the smoke test fails on it."""

from __future__ import annotations

from .devices import StartupDevices
from .floors import Floors
from .gridengine import GridEngine, GridEngineRecords
from .htcondor import HTCondor, HTCondorRecords, ShellWrapper
from .lsf import Lsf
from .match import Match
from .packaged import Packaged
from .pbs import Pbs, PbsRecords
from .pilot import Pilot
from .publish import Publish
from .reading import Reading
from .slurm import Slurm, SlurmRecords
from .standalone import Standalone
from .stores import Drain, RecordsSummary, Status
from .storm import Storm

ALL = (Floors, Standalone, Slurm, StartupDevices, Lsf, GridEngine, HTCondor, Pbs, ShellWrapper,
       SlurmRecords, GridEngineRecords, HTCondorRecords, PbsRecords,
       Pilot, Storm, Drain, Status, RecordsSummary, Reading, Match, Publish, Packaged)
