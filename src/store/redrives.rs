//! Redrives and the re-run of a version as a new version with the same
//! content (`RERUN_*`), which redrives, repair and resubmission share.
//!
//! May import: `ports`, `bugs`, `store::sql`.

use super::{json_array, sql, Store};
use crate::core::state::{JobState, RedriveItemState, RedrivePhase, RedriveState};
use crate::ports::{Database, PortError, SqlValue, Stmt};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A letter a redrive may touch, with what the ledger says of it now.
#[derive(Debug, Deserialize)]
pub struct Candidate {
    pub job_id: String,
    pub tenant_id: String,
    pub doc_id: String,
    pub version: u32,
    pub failure_bucket: Option<String>,
    pub last_seen: i64,
    pub latest_version: Option<u32>,
    pub live_version: Option<u32>,
    pub redriven: i64,
    /// The letter's job as it is now: a letter Queues forwarded for a job
    /// still queued or running is evidence, not a failure to redrive.
    pub job_state_now: Option<JobState>,
}

/// Which letters a redrive considers (each `None`: any).
#[derive(Debug, Clone, Copy, Default)]
pub struct CandidateFilter<'a> {
    pub bucket: Option<&'a str>,
    pub since: Option<i64>,
    pub until: Option<i64>,
    /// Stored document keys.
    pub doc_ids: Option<&'a [String]>,
    pub tenant_id: Option<&'a str>,
}

/// A redrive (`redrives`).
#[derive(Debug, Deserialize, Serialize, Clone)]
pub struct RedriveRow {
    pub redrive_id: String,
    pub plan_id: String,
    pub state: RedriveState,
    pub params: String,
    pub stop_reason: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A redrive item, with the state of its re-run's job.
#[derive(Debug, Deserialize, Serialize, Clone)]
pub struct ItemRow {
    pub letter_job_id: String,
    pub tenant_id: String,
    #[serde(serialize_with = "crate::core::ids::serialize_doc_id")]
    pub doc_id: String,
    pub version: u32,
    pub phase: RedrivePhase,
    pub seq: u32,
    pub state: RedriveItemState,
    pub new_job_id: Option<String>,
    pub new_version: Option<u32>,
    pub job_state: Option<JobState>,
}

/// One event of a redrive's audit trail; `detail` is its JSON text.
#[derive(Debug, Deserialize, Serialize, Clone, PartialEq)]
pub struct AuditRow {
    pub at: i64,
    pub event: String,
    pub detail: String,
}

#[derive(Deserialize)]
struct RedriveIdRow {
    redrive_id: String,
}

/// An item as a redrive's creation writes it.
#[derive(Serialize)]
pub struct NewItem<'a> {
    pub job_id: &'a str,
    pub doc_id: &'a str,
    pub version: u32,
    pub phase: RedrivePhase,
    pub seq: usize,
    pub state: RedriveItemState,
}

/// Which version a re-run copies, and the condition it is under.
#[derive(Clone, Copy, Debug)]
pub enum RerunOf<'a> {
    /// The latest version, not live (`RERUN_ADVANCE`).
    Latest,
    /// The live version, whose vectors are missing (`REPAIR_RERUN_ADVANCE`).
    Live,
    /// A redrive item's letter: only while the item is pending, and the
    /// item is marked sent in the same batch (`REDRIVE_RERUN_ADVANCE`).
    RedriveItem {
        redrive_id: &'a str,
        letter_job_id: &'a str,
    },
}

fn opt_text(v: Option<&str>) -> SqlValue {
    v.map_or(SqlValue::Null, Into::into)
}

fn opt_int(v: Option<i64>) -> SqlValue {
    v.map_or(SqlValue::Null, SqlValue::Int)
}

fn audit_stmt(redrive_id: &str, now: i64, event: &str, detail: &Value) -> Stmt {
    Stmt::new(
        sql::REDRIVE_AUDIT,
        vec![
            redrive_id.into(),
            SqlValue::Int(now),
            event.into(),
            detail.to_string().into(),
        ],
    )
}

#[derive(Deserialize)]
struct IsDeleteRow {
    is_delete: i64,
}

impl<D: Database> Store<D> {
    /// Letters matching the filter (newest first, at most `limit`), with
    /// whether each was redriven and its job's state now.
    /// `overlapping`: the seeded bug `RedriveOverlaps`'s statement.
    pub async fn redrive_candidates(
        &self,
        f: &CandidateFilter<'_>,
        limit: usize,
        overlapping: bool,
    ) -> Result<Vec<Candidate>, PortError> {
        let doc_ids = f.doc_ids.map(json_array);
        let params = vec![
            opt_text(f.bucket),
            opt_int(f.since),
            opt_int(f.until),
            opt_text(doc_ids.as_deref()),
            SqlValue::Int(limit as i64),
            opt_text(f.tenant_id),
        ];
        let q = if overlapping {
            crate::bugs::sql::REDRIVE_CANDIDATES_OVERLAPPING
        } else {
            sql::REDRIVE_CANDIDATES
        };
        self.db.query(Stmt::new(q, params)).await
    }

    /// Records a redrive, its creation in the audit trail and its items, in
    /// one batch. `false`: that redrive exists already (one plan, one redrive).
    pub async fn redrive_create(
        &self,
        redrive_id: &str,
        plan_id: &str,
        params: &str,
        now: i64,
        created: &Value,
        items: &[NewItem<'_>],
    ) -> Result<bool, PortError> {
        let mut stmts = vec![
            Stmt::new(
                sql::REDRIVE_INSERT,
                vec![
                    redrive_id.into(),
                    plan_id.into(),
                    params.into(),
                    SqlValue::Int(now),
                ],
            ),
            audit_stmt(redrive_id, now, "created", created),
        ];
        if !items.is_empty() {
            stmts.push(Stmt::new(
                sql::REDRIVE_ITEMS_INSERT,
                vec![redrive_id.into(), json_array(items).into()],
            ));
        }
        match self.db.batch(stmts).await {
            Err(e) if e.code == "db_constraint" => Ok(false),
            Err(e) => Err(e),
            Ok(_) => Ok(true),
        }
    }

    pub async fn redrive_row(&self, redrive_id: &str) -> Result<Option<RedriveRow>, PortError> {
        Ok(self
            .db
            .query(Stmt::new(sql::REDRIVE_GET, vec![redrive_id.into()]))
            .await?
            .into_iter()
            .next())
    }

    pub async fn redrive_items(&self, redrive_id: &str) -> Result<Vec<ItemRow>, PortError> {
        self.db
            .query(Stmt::new(sql::REDRIVE_ITEMS, vec![redrive_id.into()]))
            .await
    }

    /// Moves an item from state `from` to `state` (with its re-run's job and version).
    pub async fn redrive_item_set(
        &self,
        redrive_id: &str,
        letter: &str,
        from: RedriveItemState,
        state: RedriveItemState,
        job: Option<&str>,
        version: Option<u32>,
    ) -> Result<(), PortError> {
        let params = vec![
            redrive_id.into(),
            letter.into(),
            state.as_str().into(),
            job.map_or(SqlValue::Null, Into::into),
            version.map_or(SqlValue::Null, Into::into),
            from.as_str().into(),
        ];
        self.db
            .execute(Stmt::new(sql::REDRIVE_ITEM_SET, params))
            .await
            .map(|_| ())
    }

    pub async fn redrive_set_state(
        &self,
        redrive_id: &str,
        state: RedriveState,
        reason: Option<&str>,
        now: i64,
    ) -> Result<(), PortError> {
        let params = vec![
            redrive_id.into(),
            state.as_str().into(),
            opt_text(reason),
            SqlValue::Int(now),
        ];
        self.db
            .execute(Stmt::new(sql::REDRIVE_SET_STATE, params))
            .await
            .map(|_| ())
    }

    pub async fn redrive_audit(
        &self,
        redrive_id: &str,
        now: i64,
        event: &str,
        detail: &Value,
    ) -> Result<(), PortError> {
        self.db
            .execute(audit_stmt(redrive_id, now, event, detail))
            .await
            .map(|_| ())
    }

    pub async fn redrive_audit_list(&self, redrive_id: &str) -> Result<Vec<AuditRow>, PortError> {
        self.db
            .query(Stmt::new(sql::REDRIVE_AUDIT_LIST, vec![redrive_id.into()]))
            .await
    }

    /// Active redrives (canary or running), at most `limit`: their ids.
    pub async fn redrives_active(&self, limit: usize) -> Result<Vec<String>, PortError> {
        let rows: Vec<RedriveIdRow> = self
            .db
            .query(Stmt::new(
                sql::REDRIVES_ACTIVE,
                vec![SqlValue::Int(limit as i64)],
            ))
            .await?;
        Ok(rows.into_iter().map(|r| r.redrive_id).collect())
    }

    /// Whether version `version` of `doc_id` is a tombstone.
    pub async fn version_is_delete(&self, doc_id: &str, version: u32) -> Result<bool, PortError> {
        let rows: Vec<IsDeleteRow> = self
            .db
            .query(Stmt::new(
                sql::VERSION_IS_DELETE,
                vec![doc_id.into(), version.into()],
            ))
            .await?;
        Ok(rows.first().is_some_and(|r| r.is_delete == 1))
    }

    /// Copies `version` as version + 1 (the version row, naming the parts that hold its text; a job
    /// `new_job`) in one batch, under the condition `of` names. `false`: the
    /// condition did not hold, nothing was written. The batch starts with
    /// the tenant's move guard: an `Err` of `db_constraint` if its tenant
    /// is fenced, moved away or moving in (the caller reads which).
    pub async fn rerun(
        &self,
        doc_id: &str,
        version: u32,
        now: i64,
        new_job: &str,
        of: RerunOf<'_>,
    ) -> Result<bool, PortError> {
        let p = || vec![doc_id.into(), version.into(), SqlValue::Int(now)];
        let mut job_params = p();
        job_params.push(new_job.into());
        let (advance, advance_params, item) = match of {
            RerunOf::Latest => (sql::RERUN_ADVANCE, p(), None),
            RerunOf::Live => (sql::REPAIR_RERUN_ADVANCE, p(), None),
            RerunOf::RedriveItem {
                redrive_id,
                letter_job_id,
            } => {
                let mut item_params = job_params.clone();
                item_params.extend([redrive_id.into(), letter_job_id.into()]);
                (
                    sql::REDRIVE_RERUN_ADVANCE,
                    item_params.clone(),
                    Some(item_params),
                )
            }
        };
        let tenant = crate::core::ids::split_key(doc_id).0;
        let mut stmts = vec![
            Stmt::new(sql::TENANT_MOVE_GUARD, vec![tenant.into()]),
            Stmt::new(advance, advance_params),
            Stmt::new(sql::RERUN_COPY_VERSION, p()),
            Stmt::new(sql::RERUN_INSERT_JOB, job_params),
        ];
        if let Some(item_params) = item {
            stmts.push(Stmt::new(sql::REDRIVE_ITEM_SENT, item_params));
        }
        let changes = self.db.batch(stmts).await?;
        Ok(changes.get(1).copied().unwrap_or(0) > 0)
    }
}
