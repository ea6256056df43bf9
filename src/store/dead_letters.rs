//! The dead-letter archive: letters archived by the consumer and the
//! dead-letter queue's consumer, and the read-only diagnosis over them.
//!
//! May import: `ports`, `store::sql`.

use super::{sql, Store};
use crate::ports::{Database, JobMessage, PortError, SqlValue, Stmt};
use serde::{Deserialize, Serialize};

/// An archived letter as the archive's pages show it.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct LetterRow {
    pub job_id: String,
    pub message_id: String,
    pub tenant_id: String,
    #[serde(serialize_with = "crate::core::ids::serialize_doc_id")]
    pub doc_id: String,
    pub version: u32,
    /// The job's state and step when the letter was archived.
    pub job_state: Option<String>,
    pub job_step: Option<String>,
    pub failure_bucket: Option<String>,
    pub attempts: Option<u32>,
    pub chunk_count: Option<u32>,
    pub first_seen: i64,
    pub last_seen: i64,
    pub times_seen: u32,
    /// 1 when the letter's version is still its document's latest.
    pub version_is_latest: u8,
}

/// One group of the archive's summary: letters by bucket, by whether their
/// version is the latest, and by chunk-count bucket.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct LetterGroupRow {
    pub tenant_id: String,
    pub failure_bucket: String,
    pub version_is_latest: u8,
    pub chunk_count_bucket: String,
    pub letters: u64,
    pub deliveries: u64,
    pub first_seen: i64,
    pub last_seen: i64,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct LetterFilter {
    pub bucket: Option<String>,
    /// A document's stored key (`core::ids::DocKey`).
    pub doc_id: Option<String>,
    pub tenant_id: Option<String>,
    pub since: Option<i64>,
    pub until: Option<i64>,
    pub cursor: Option<String>,
    pub limit: usize,
}

fn opt_text(v: &Option<String>) -> SqlValue {
    v.clone().map_or(SqlValue::Null, SqlValue::Text)
}

fn opt_int(v: Option<i64>) -> SqlValue {
    v.map_or(SqlValue::Null, SqlValue::Int)
}

fn letter_params(message_id: &str, msg: &JobMessage, now: i64) -> Vec<SqlValue> {
    vec![
        msg.job_id.as_str().into(),
        message_id.into(),
        msg.doc_id.as_str().into(),
        msg.version.into(),
        SqlValue::Int(now),
    ]
}

impl<D: Database> Store<D> {
    /// Archives a letter with a snapshot of its job (`DEAD_LETTER_ARCHIVE`:
    /// idempotent per job; a repeat keeps the first final evidence).
    pub async fn archive_dead_letter(
        &self,
        message_id: &str,
        msg: &JobMessage,
        now: i64,
    ) -> Result<(), PortError> {
        let stmt = Stmt::new(
            sql::DEAD_LETTER_ARCHIVE,
            letter_params(message_id, msg, now),
        );
        self.db.execute(stmt).await.map(|_| ())
    }

    /// The dead-letter queue's receipt of a letter the consumer archived
    /// (`DEAD_LETTER_CONFIRM`: written only if it is missing).
    pub async fn confirm_dead_letter(
        &self,
        message_id: &str,
        msg: &JobMessage,
        now: i64,
    ) -> Result<(), PortError> {
        let stmt = Stmt::new(
            sql::DEAD_LETTER_CONFIRM,
            letter_params(message_id, msg, now),
        );
        self.db.execute(stmt).await.map(|_| ())
    }

    /// Letters by tenant × bucket × latest × chunk-count bucket, of one
    /// tenant or all.
    pub async fn dead_letter_summary(
        &self,
        tenant_id: Option<&str>,
    ) -> Result<Vec<LetterGroupRow>, PortError> {
        let stmt = match tenant_id {
            Some(t) => Stmt::new(sql::TENANT_DEAD_LETTERS_SUMMARY, vec![t.into()]),
            None => Stmt::new(sql::DEAD_LETTERS_SUMMARY, vec![]),
        };
        self.db.query(stmt).await
    }

    /// One page of letters, newest first, as `f` selects.
    pub async fn dead_letters(&self, f: &LetterFilter) -> Result<Vec<LetterRow>, PortError> {
        let mut params = vec![
            opt_text(&f.bucket),
            opt_text(&f.doc_id),
            opt_int(f.since),
            opt_int(f.until),
            opt_text(&f.cursor),
            SqlValue::Int(f.limit as i64),
        ];
        let q = match &f.tenant_id {
            Some(t) => {
                params.push(t.as_str().into());
                sql::TENANT_DEAD_LETTERS_PAGE
            }
            None => sql::DEAD_LETTERS_PAGE,
        };
        self.db.query(Stmt::new(q, params)).await
    }
}
