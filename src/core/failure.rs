//! Failure buckets and the retry policy.
//!
//! Every failure the pipeline can meet is classified into one of a closed,
//! allow-listed set of buckets. Logs and API errors carry the bucket (and
//! diagnostic fields), never raw error text, which could hold secrets or
//! document content.

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureBucket {
    /// The stored input cannot be processed (a bug in intake validation, or
    /// data that became invalid under a new configuration).
    InputInvalid,
    EmbedRateLimited,
    EmbedUnavailable,
    /// The embedder refused the input or answered with the wrong shape.
    EmbedRejected,
    IndexRateLimited,
    IndexUnavailable,
    /// The index refused the call (limits, dimensions, malformed request).
    IndexRejected,
    /// The index disagrees with the configuration (dimensions, metric).
    IndexMisconfigured,
    DbBusy,
    /// A D1 statement failed for a reason retrying may fix (network, reset).
    DbUnavailable,
    /// A D1 statement was refused (constraint, schema): a bug or a missing migration.
    DbRejected,
    QueueUnavailable,
    /// The Worker's configuration is invalid or a binding is missing.
    ConfigInvalid,
    /// An internal invariant did not hold (e.g. staged rows missing).
    Internal,
    /// The Worker's own code panicked or threw while handling the job: a
    /// bug, so the job ends `failed` at once instead of being retried.
    InternalError,
}

impl FailureBucket {
    pub const ALL: [FailureBucket; 15] = [
        FailureBucket::InputInvalid,
        FailureBucket::EmbedRateLimited,
        FailureBucket::EmbedUnavailable,
        FailureBucket::EmbedRejected,
        FailureBucket::IndexRateLimited,
        FailureBucket::IndexUnavailable,
        FailureBucket::IndexRejected,
        FailureBucket::IndexMisconfigured,
        FailureBucket::DbBusy,
        FailureBucket::DbUnavailable,
        FailureBucket::DbRejected,
        FailureBucket::QueueUnavailable,
        FailureBucket::ConfigInvalid,
        FailureBucket::Internal,
        FailureBucket::InternalError,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FailureBucket::InputInvalid => "input_invalid",
            FailureBucket::EmbedRateLimited => "embed_rate_limited",
            FailureBucket::EmbedUnavailable => "embed_unavailable",
            FailureBucket::EmbedRejected => "embed_rejected",
            FailureBucket::IndexRateLimited => "index_rate_limited",
            FailureBucket::IndexUnavailable => "index_unavailable",
            FailureBucket::IndexRejected => "index_rejected",
            FailureBucket::IndexMisconfigured => "index_misconfigured",
            FailureBucket::DbBusy => "db_busy",
            FailureBucket::DbUnavailable => "db_unavailable",
            FailureBucket::DbRejected => "db_rejected",
            FailureBucket::QueueUnavailable => "queue_unavailable",
            FailureBucket::ConfigInvalid => "config_invalid",
            FailureBucket::Internal => "internal",
            FailureBucket::InternalError => "internal_error",
        }
    }

    pub fn parse(raw: &str) -> Option<FailureBucket> {
        FailureBucket::ALL.into_iter().find(|b| b.as_str() == raw)
    }

    /// Transient failures are retried with backoff; permanent ones end the
    /// job as `failed` at once. `ConfigInvalid` and `IndexMisconfigured` are
    /// transient on purpose: the fix is a deploy, after which the retry succeeds,
    /// and the attempt limit still bounds them.
    pub fn is_transient(self) -> bool {
        !matches!(
            self,
            FailureBucket::InputInvalid
                | FailureBucket::EmbedRejected
                | FailureBucket::IndexRejected
                | FailureBucket::DbRejected
                | FailureBucket::Internal
                | FailureBucket::InternalError
        )
    }
}

/// Capped exponential backoff with deterministic jitter, for as long as a
/// window of time since the job began failing (progress resets it), within
/// a bound on attempts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    pub attempts_max: u32,
    pub base_delay_seconds: u32,
    pub max_delay_seconds: u32,
    /// A transient failure is retried while the job has been failing for
    /// less than this (a transient outage up to it is survived).
    pub window_seconds: u32,
}

/// What to do after a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryDecision {
    RetryAfter {
        delay_seconds: u32,
    },
    /// Permanent failure: the job ends `failed`.
    Fail,
    /// Transient, but the attempts are used up: the job ends `dead`.
    GiveUp,
}

/// When a job's current run of failures began, at a transient failure at
/// `now_ms`: `since` (the run's start) unless the previous failure,
/// `last_failed_ms`, is more than `gap_seconds` old, i.e. longer ago than
/// any wait between two failures of one outage (the backoff cap plus a
/// dead invocation's lease). Then the job was waiting, not failing, and
/// the run starts now (`None`).
pub fn failing_run_start(
    since: Option<i64>,
    last_failed_ms: Option<i64>,
    now_ms: i64,
    gap_seconds: u32,
) -> Option<i64> {
    let since = since?;
    match last_failed_ms {
        Some(last) if now_ms - last > i64::from(gap_seconds) * 1000 => None,
        _ => Some(since),
    }
}

impl RetryPolicy {
    /// `attempt` is the 1-based number of the attempt that just failed
    /// (since the last progress); `failing_for_seconds`, how long the job
    /// has been failing without progress.
    pub fn decide(
        &self,
        bucket: FailureBucket,
        job_id: &str,
        attempt: u32,
        failing_for_seconds: i64,
    ) -> RetryDecision {
        if !bucket.is_transient() {
            return RetryDecision::Fail;
        }
        if attempt >= self.attempts_max || failing_for_seconds >= i64::from(self.window_seconds) {
            return RetryDecision::GiveUp;
        }
        RetryDecision::RetryAfter {
            delay_seconds: self.delay_seconds(job_id, attempt),
        }
    }

    /// "Equal jitter": half of the capped exponential delay, plus a jitter in
    /// [0, half] derived from (job id, attempt), so runs replay exactly.
    pub fn delay_seconds(&self, job_id: &str, attempt: u32) -> u32 {
        let exp = 1u64 << attempt.saturating_sub(1).min(30);
        let capped =
            (u64::from(self.base_delay_seconds) * exp).min(u64::from(self.max_delay_seconds));
        let half = capped / 2;
        let seed = crate::core::ids::sha256_digest(format!("{job_id}:{attempt}").as_bytes());
        let [a, b, c, d, ..] = seed;
        let jitter = u64::from(u32::from_be_bytes([a, b, c, d])) % (half + 1);
        // At most `max_delay_seconds`, a u32.
        u32::try_from((capped - half + jitter).max(1)).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: RetryPolicy = RetryPolicy {
        attempts_max: 5,
        base_delay_seconds: 4,
        max_delay_seconds: 60,
        window_seconds: 3600,
    };

    #[test]
    fn buckets_round_trip_and_are_classified() {
        for b in FailureBucket::ALL {
            assert_eq!(FailureBucket::parse(b.as_str()), Some(b));
            assert_eq!(serde_json::to_value(b).unwrap(), b.as_str());
        }
        assert!(FailureBucket::EmbedRateLimited.is_transient());
        assert!(!FailureBucket::InputInvalid.is_transient());
        assert_eq!(FailureBucket::parse("oops"), None);
    }

    #[test]
    fn backoff_grows_is_capped_and_replays() {
        let d: Vec<u32> = (1..=8).map(|a| P.delay_seconds("job", a)).collect();
        assert_eq!(
            d,
            (1..=8)
                .map(|a| P.delay_seconds("job", a))
                .collect::<Vec<_>>()
        );
        for (a, x) in d.iter().enumerate() {
            let capped = (4u32 << a).min(60);
            assert!(
                *x >= capped / 2 && *x <= capped,
                "attempt {}: {x} not in [{}, {capped}]",
                a + 1,
                capped / 2
            );
        }
        assert_ne!(
            P.delay_seconds("job-a", 3),
            P.delay_seconds("job-b", 3),
            "jitter should depend on the job"
        );
    }

    #[test]
    fn decisions() {
        assert_eq!(
            P.decide(FailureBucket::InputInvalid, "j", 1, 0),
            RetryDecision::Fail
        );
        assert!(matches!(
            P.decide(FailureBucket::DbBusy, "j", 1, 0),
            RetryDecision::RetryAfter { .. }
        ));
        assert_eq!(
            P.decide(FailureBucket::DbBusy, "j", 5, 0),
            RetryDecision::GiveUp
        );
        // The window: failing for an hour without progress is the end.
        assert!(matches!(
            P.decide(FailureBucket::DbBusy, "j", 2, 3599),
            RetryDecision::RetryAfter { .. }
        ));
        assert_eq!(
            P.decide(FailureBucket::DbBusy, "j", 2, 3600),
            RetryDecision::GiveUp
        );
    }
    #[test]
    fn a_failing_run_restarts_after_a_gap_longer_than_any_wait_of_one_outage() {
        // Not failing before: no run to continue.
        assert_eq!(failing_run_start(None, None, 10_000, 60), None);
        assert_eq!(failing_run_start(None, Some(9_000), 10_000, 60), None);
        // A run from 1 s, last failure 60 s ago: the run goes on.
        assert_eq!(
            failing_run_start(Some(1_000), Some(10_000), 70_000, 60),
            Some(1_000)
        );
        // Last failure more than the gap ago: the job was waiting, the run starts again.
        assert_eq!(
            failing_run_start(Some(1_000), Some(10_000), 70_001, 60),
            None
        );
        // A job from before the column existed keeps its run.
        assert_eq!(
            failing_run_start(Some(1_000), None, 1_000_000, 60),
            Some(1_000)
        );
    }
}
