//! The engines that start agents through the job's own launcher as tool daemons, with no pipe
//! from the front end to them: each module holds its engine's start and its asking. Their
//! agents connect back over TLS ([`crate::Rendezvous`] on the front end's side,
//! [`crate::run_tls`] on the agent's). The engines whose launcher forwards an agent's
//! standard I/O (Slurm's `srun`, hydra, a command template) are commands per node
//! ([`crate::Launch`]), started by the fleet.
//!
//! - [`orte`]: Open MPI 4's `orterun`, asked through the MPIR tool-daemon extension.
//! - [`prrte`]: Open MPI 5's PRRTE, asked through PMIx (`PMIx_Spawn`).

pub mod orte;
pub mod prrte;
