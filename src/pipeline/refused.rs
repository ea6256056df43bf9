//! Why an operation was refused: the domain's reasons, each carrying only
//! what its message needs. The pipeline knows nothing of HTTP; `api` maps
//! each reason to a status, a stable code and a message (one `match`).
//!
//! A refusal is an outcome, not a failure: the ledger answered, and said no.
//! A failing port is a [`PortError`](crate::ports::PortError) instead, so
//! the operations return `Result<Outcome<T>, PortError>`.

/// What a refusable operation ends in.
pub type Outcome<T> = Result<T, Refused>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refused {
    /// No generation has this number.
    GenerationNotFound { generation: u32 },
    /// Only a retained generation can be made active again.
    GenerationNotRetained {
        generation: u32,
        state: crate::core::state::GenerationState,
    },
    /// The generation lacks vectors of live documents: no switch to it.
    GenerationIncomplete { generation: u32 },
    /// Only a retained or abandoned generation retires.
    GenerationInUse {
        generation: u32,
        state: crate::core::state::GenerationState,
    },
    /// Another generation is being built.
    GenerationBuilding,
    /// The running configuration is the active generation's: nothing to build.
    ConfigUnchanged,
    /// A retained generation was built with the running configuration (a
    /// roll forward after a rollback): activate it, or retire it first.
    ConfigRetained { generation: u32 },
    /// No such document.
    DocumentNotFound,
    /// The document has no live version (none yet, or it is deleted).
    DocumentNotIndexed,
    /// A newer version than the one to reindex is being indexed (it uses
    /// the current configuration anyway).
    VersionIndexing { version: u32 },
    /// A newer version arrived between the read and the re-run.
    NewerVersionArrived,
    /// A backfill is running or paused: one at a time.
    BackfillOpen,
    /// Another start (concurrent, or an earlier attempt of a retried
    /// request) won the race to start one.
    BackfillStartedMeanwhile,
    /// No such backfill.
    BackfillNotFound,
    /// A `config` backfill builds a generation for every tenant: it takes
    /// no tenant.
    BackfillConfigScoped,
    /// The backfill's state does not allow the action.
    BackfillState {
        state: crate::core::state::BackfillState,
        action: super::BackfillAction,
    },
    /// A tenant of this ID exists already.
    TenantExists,
    /// The platform holds `max` tenants (`TENANTS_MAX`).
    TenantLimit { max: u64 },
    /// No such tenant.
    TenantNotFound,
    /// The tenant is moving between shards and this change must wait: its
    /// writes, state, quotas and tokens are held while the move catches
    /// up (briefly), its sync sessions and another move while it moves.
    TenantMoving,
    /// No such move.
    MoveNotFound,
    /// The move's state does not allow the action.
    MoveState {
        state: crate::core::state::MoveState,
        action: &'static str,
    },
    /// A move needs the same index configuration (chunker, model,
    /// dimensions) active on both shards, and no generation being built
    /// on the new one.
    MoveConfigMismatch,
    /// A move to the shard the tenant is on, or one the deployment lacks.
    MoveShardInvalid,
    /// Placement: the shard is dedicated to another tenant.
    ShardDedicated,
    /// Placement: a dedicated shard must be empty, and this one is not.
    ShardNotEmpty,
    /// Placement: no shard takes new tenants (each is dedicated, cannot
    /// say its size, or is at `SHARD_FULL_BYTES`).
    NoShardAvailable,
    /// The tenant has no token of this ID.
    TokenNotFound,
    /// The letters changed since the preflight that made the plan (or the
    /// plan was executed already).
    PlanChanged,
    /// No such sync session (of this tenant).
    SyncNotFound,
    /// The session expired before its commit: it deletes nothing.
    SyncExpired,
    /// A later session of the source committed first.
    SyncSuperseded,
    /// A write or a mark names a session that is not open.
    SyncNotOpen,
    /// The commit would delete more than `share_max_percent` of the
    /// source's `documents` (`to_delete` of them).
    SyncDeleteGuard {
        to_delete: u64,
        documents: u64,
        share_max_percent: u32,
    },
}
