//! The ledger's state names, one enum per column that holds a state.
//!
//! Each enum's strings are the values the column's `CHECK` constraint in
//! `migrations/` allows (a test reads the migrations and compares), so a row
//! read from D1 always parses, and `as_str()` is what a statement binds.
//! Rows carry these enums, not strings; a typo in a state is a compile error.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One state enum: its variants with their stored names, `as_str`, `parse`,
/// `ALL`, and serde as the stored name.
macro_rules! states {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// Every state, in the order the migration lists them.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The name stored in D1 and shown by the API.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// The state stored under `text`, if any.
            pub fn parse(text: &str) -> Option<$name> {
                match text {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }


        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$name, D::Error> {
                let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                $name::parse(&text).ok_or_else(|| {
                    serde::de::Error::unknown_variant(&text, &[$($text,)+])
                })
            }
        }
    };
}

states! {
    /// `jobs.state`: a job's place in its state machine.
    JobState {
        Queued = "queued",
        Running = "running",
        UpForRetry = "up_for_retry",
        Succeeded = "succeeded",
        Failed = "failed",
        Superseded = "superseded",
        Dead = "dead",
    }
}

impl JobState {
    /// A job that will still run (or is running): not ended.
    pub const fn is_open(self) -> bool {
        matches!(
            self,
            JobState::Queued | JobState::Running | JobState::UpForRetry
        )
    }

    /// Ended without indexing its version: a failure the operator sees.
    pub const fn is_failure(self) -> bool {
        matches!(self, JobState::Failed | JobState::Dead)
    }
}

states! {
    /// `jobs.kind`.
    JobKind {
        Index = "index",
        Delete = "delete",
    }
}

states! {
    /// `tenants.state`: whether a tenant's tokens are accepted.
    TenantState {
        Active = "active",
        Disabled = "disabled",
    }
}

states! {
    /// `cleanup_intents.reason`: why a set of vectors is to be deleted.
    IntentReason {
        Replaced = "replaced",
        Abandoned = "abandoned",
    }
}

states! {
    /// `generations.state`.
    GenerationState {
        Building = "building",
        Active = "active",
        Retained = "retained",
        Retiring = "retiring",
        Retired = "retired",
        Abandoned = "abandoned",
    }
}

impl GenerationState {
    /// New versions are still written into a generation in this state.
    pub const fn is_written(self) -> bool {
        matches!(
            self,
            GenerationState::Building | GenerationState::Active | GenerationState::Retained
        )
    }
}

states! {
    /// `backfills.state`.
    BackfillState {
        Running = "running",
        Paused = "paused",
        Cancelled = "cancelled",
        Completed = "completed",
        Failed = "failed",
    }
}

impl BackfillState {
    /// Not ended: the backfill may still enqueue work.
    pub const fn is_open(self) -> bool {
        matches!(self, BackfillState::Running | BackfillState::Paused)
    }
}

states! {
    /// `redrives.state`.
    RedriveState {
        Canary = "canary",
        Running = "running",
        Stopped = "stopped",
        Completed = "completed",
    }
}

impl RedriveState {
    /// Still sending or waiting for its sends.
    pub const fn is_open(self) -> bool {
        matches!(self, RedriveState::Canary | RedriveState::Running)
    }
}

states! {
    /// `redrive_items.phase`.
    RedrivePhase {
        Canary = "canary",
        Batch = "batch",
    }
}

states! {
    /// `redrive_items.state`.
    RedriveItemState {
        Pending = "pending",
        Sent = "sent",
        Succeeded = "succeeded",
        Failed = "failed",
        Skipped = "skipped",
    }
}

states! {
    /// `syncs.state`: a source sync session. `open` takes writes until it
    /// commits or expires; `committing` deletes what it did not see, page
    /// by page; `superseded` lost to a later session of its source.
    SyncState {
        Open = "open",
        Committing = "committing",
        Committed = "committed",
        Expired = "expired",
        Superseded = "superseded",
    }
}

states! {
    /// `sync_deletes.state`: a planned delete of a commit.
    SyncDeleteState {
        Pending = "pending",
        Deleted = "deleted",
        Kept = "kept",
    }
}

states! {
    /// `tenant_moves.state`: a tenant's move to another shard. `copying`
    /// (may be `paused`), then `catching_up` (fenced), `switched` (the
    /// directory names the new shard), `cleaning` (the old shard's rows
    /// and vectors removed), `completed`; or, before the switch,
    /// `cancelling` (the copy removed) and `cancelled`.
    MoveState {
        Copying = "copying",
        Paused = "paused",
        CatchingUp = "catching_up",
        Switched = "switched",
        Cleaning = "cleaning",
        Completed = "completed",
        Cancelling = "cancelling",
        Cancelled = "cancelled",
    }
}

states! {
    /// `tenants.move_state`: a tenant's part in a move, on the shard that
    /// holds the row (NULL: not moving). See migration 0033.
    TenantMoveState {
        Copying = "copying",
        Fenced = "fenced",
        Moved = "moved",
        MovingIn = "moving_in",
    }
}

impl MoveState {
    /// Whether the move has ended (nothing more happens to it).
    pub fn is_final(self) -> bool {
        matches!(self, MoveState::Completed | MoveState::Cancelled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values a `CHECK (column IN ('a', 'b'))` of `table` allows, from
    /// the migrations in order (a later migration that recreates the table
    /// wins).
    fn check_values(table: &str, column: &str) -> Vec<String> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        let migrations: Vec<String> = files
            .iter()
            .map(|f| std::fs::read_to_string(f).unwrap())
            .collect();
        let mut found = Vec::new();
        for sql in &migrations {
            let mut current_table = String::new();
            for line in sql.lines() {
                let l = line.trim();
                if let Some(rest) = l.strip_prefix("CREATE TABLE ") {
                    let rest = rest.trim_start_matches("IF NOT EXISTS ");
                    current_table = rest.split([' ', '(']).next().unwrap().to_string();
                }
                let key = format!("CHECK ({column} IN (");
                if current_table == table && l.starts_with(column) {
                    if let Some(at) = l.find(&key) {
                        let list = &l[at + key.len()..];
                        let list = &list[..list.find(')').unwrap()];
                        found = list
                            .split(',')
                            .map(|v| v.trim().trim_matches('\'').to_string())
                            .collect();
                    }
                }
            }
        }
        assert!(!found.is_empty(), "no CHECK for {table}.{column}");
        found
    }

    fn names(all: &[impl Copy + std::fmt::Display]) -> Vec<String> {
        all.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn every_enum_matches_its_check_constraint() {
        assert_eq!(names(JobState::ALL), check_values("jobs", "state"));
        assert_eq!(names(JobKind::ALL), check_values("jobs", "kind"));
        assert_eq!(
            names(IntentReason::ALL),
            check_values("cleanup_intents", "reason")
        );
        assert_eq!(
            names(GenerationState::ALL),
            check_values("generations", "state")
        );
        assert_eq!(
            names(BackfillState::ALL),
            check_values("backfills", "state")
        );
        assert_eq!(names(RedriveState::ALL), check_values("redrives", "state"));
        assert_eq!(
            names(RedrivePhase::ALL),
            check_values("redrive_items", "phase")
        );
        assert_eq!(
            names(RedriveItemState::ALL),
            check_values("redrive_items", "state")
        );
        assert_eq!(names(SyncState::ALL), check_values("syncs", "state"));
        assert_eq!(
            names(SyncDeleteState::ALL),
            check_values("sync_deletes", "state")
        );
        assert_eq!(names(MoveState::ALL), check_values("tenant_moves", "state"));
    }

    #[test]
    fn parse_inverts_as_str_and_serde_uses_the_stored_name() {
        for s in JobState::ALL {
            assert_eq!(JobState::parse(s.as_str()), Some(*s));
            let json = serde_json::to_string(s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.as_str()));
            assert_eq!(serde_json::from_str::<JobState>(&json).unwrap(), *s);
        }
        assert_eq!(JobState::parse("Queued"), None);
        assert!(serde_json::from_str::<GenerationState>("\"live\"").is_err());
    }
}
