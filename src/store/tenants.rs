//! Tenants and their tokens: creation, state, quotas and usage, the token
//! lookup that authenticates a request, and the per-minute request count.
//!
//! May import: `ports`, `core`, `store::sql`.

use super::{int, sql, Store};
use crate::core::state::{TenantMoveState, TenantState};
use crate::ports::{Database, PortError, SqlValue, Stmt};
use serde::Deserialize;

/// A tenant as the ledger holds it (quotas `None`: the configured default).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct TenantRow {
    pub tenant_id: String,
    pub state: TenantState,
    pub documents_max: Option<u64>,
    pub bytes_max: Option<u64>,
    pub requests_per_minute_max: Option<u64>,
    pub documents: i64,
    pub bytes: i64,
    pub rate_minute: i64,
    pub rate_requests: u64,
    pub created_at: i64,
    pub updated_at: i64,
    /// Tokens not revoked.
    pub tokens: u64,
    /// D1 rows its jobs read and wrote, as D1 billed them.
    pub d1_rows_read: u64,
    pub d1_rows_written: u64,
    /// Its part in a move to another shard, if it is moving (migration 0033).
    #[serde(default)]
    pub move_state: Option<TenantMoveState>,
}

/// An admitted request's tenant: its move state (`fenced`: the caller
/// checks the directory again before it is served here).
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
pub struct Taken {
    pub move_state: Option<TenantMoveState>,
}

/// A token as listed (never its hash).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct TokenRow {
    pub token_id: String,
    pub tenant_id: String,
    /// JSON array of scopes.
    pub scopes: String,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
}

/// What authenticates a token: read by its ID, compared by its hash.
#[derive(Debug, Clone, Deserialize)]
pub struct TokenAuthRow {
    pub tenant_id: String,
    pub token_hash: String,
    pub scopes: String,
    pub state: TenantState,
}

/// A tenant's stored documents and bytes, and its quotas of them.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
pub struct TenantUsageRow {
    pub documents: i64,
    pub bytes: i64,
    pub documents_max: i64,
    pub bytes_max: i64,
    #[serde(default)]
    pub move_state: Option<TenantMoveState>,
}

/// The quotas a tenant is created with (`None`: the configured default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quotas {
    pub documents_max: Option<u64>,
    pub bytes_max: Option<u64>,
    pub requests_per_minute_max: Option<u64>,
}

/// What an intake batch adds to its tenant's usage, and the default
/// quotas its guard checks against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageDelta {
    pub tenant_id: String,
    pub documents: i64,
    pub bytes: i64,
    pub documents_max_default: u64,
    pub bytes_max_default: u64,
}

fn opt(v: Option<u64>) -> SqlValue {
    v.map_or(SqlValue::Null, |n| int(n as i64))
}

/// The statements an intake batch starts and ends with: the quota guard
/// (aborts the batch if the tenant would pass a quota) and the usage update.
pub(super) fn usage_stmts(d: &UsageDelta) -> (Stmt, Stmt) {
    let guard = Stmt::new(
        sql::TENANT_QUOTA_GUARD,
        vec![
            d.tenant_id.as_str().into(),
            int(d.documents),
            int(d.documents_max_default as i64),
            int(d.bytes),
            int(d.bytes_max_default as i64),
        ],
    );
    let add = Stmt::new(
        sql::TENANT_ADD_USAGE,
        vec![d.tenant_id.as_str().into(), int(d.documents), int(d.bytes)],
    );
    (guard, add)
}

impl<D: Database> Store<D> {
    /// Runs a write that changes one row or none: whether it changed one.
    async fn changes_one(&self, stmt: Stmt) -> Result<bool, PortError> {
        Ok(self.db.execute(stmt).await? == 1)
    }

    /// The first row a read returns, if any.
    pub(super) async fn first<T: serde::de::DeserializeOwned>(
        &self,
        stmt: Stmt,
    ) -> Result<Option<T>, PortError> {
        Ok(self.db.query(stmt).await?.into_iter().next())
    }

    /// Creates an active tenant; `false` if it exists or `tenants_max` do.
    pub async fn create_tenant(
        &self,
        tenant_id: &str,
        quotas: &Quotas,
        tenants_max: u64,
        now: i64,
    ) -> Result<bool, PortError> {
        self.changes_one(Stmt::new(
            sql::TENANT_INSERT,
            vec![
                tenant_id.into(),
                opt(quotas.documents_max),
                opt(quotas.bytes_max),
                opt(quotas.requests_per_minute_max),
                int(now),
                int(tenants_max as i64),
            ],
        ))
        .await
    }

    pub async fn tenant(&self, tenant_id: &str) -> Result<Option<TenantRow>, PortError> {
        self.first(Stmt::new(sql::TENANT_GET, vec![tenant_id.into()]))
            .await
    }

    /// Tenants after `cursor` in ID order, at most `limit`.
    pub async fn tenants_page(
        &self,
        cursor: &str,
        limit: usize,
    ) -> Result<Vec<TenantRow>, PortError> {
        self.db
            .query(Stmt::new(
                sql::TENANTS_PAGE,
                vec![cursor.into(), int(limit as i64)],
            ))
            .await
    }

    /// Sets a tenant's state; `false` if there is no such tenant.
    pub async fn set_tenant_state(
        &self,
        tenant_id: &str,
        state: TenantState,
        now: i64,
    ) -> Result<bool, PortError> {
        self.changes_one(Stmt::new(
            sql::TENANT_SET_STATE,
            vec![tenant_id.into(), state.as_str().into(), int(now)],
        ))
        .await
    }

    /// Replaces a tenant's quotas; `false` if there is no such tenant.
    pub async fn set_tenant_quotas(
        &self,
        tenant_id: &str,
        quotas: &Quotas,
        now: i64,
    ) -> Result<bool, PortError> {
        self.changes_one(Stmt::new(
            sql::TENANT_SET_QUOTAS,
            vec![
                tenant_id.into(),
                opt(quotas.documents_max),
                opt(quotas.bytes_max),
                opt(quotas.requests_per_minute_max),
                int(now),
            ],
        ))
        .await
    }

    /// Records a token (its hash only); `false` if the tenant does not exist.
    pub async fn insert_token(
        &self,
        token_id: &str,
        tenant_id: &str,
        token_hash: &str,
        scopes_json: &str,
        now: i64,
    ) -> Result<bool, PortError> {
        self.changes_one(Stmt::new(
            sql::TOKEN_INSERT,
            vec![
                token_id.into(),
                tenant_id.into(),
                token_hash.into(),
                scopes_json.into(),
                int(now),
            ],
        ))
        .await
    }

    /// Revokes a token (a revoked one stays as it was). The token after it,
    /// or `None` if the tenant has no such token.
    pub async fn revoke_token(
        &self,
        tenant_id: &str,
        token_id: &str,
        now: i64,
    ) -> Result<Option<TokenRow>, PortError> {
        self.db
            .execute(Stmt::new(
                sql::TOKEN_REVOKE,
                vec![tenant_id.into(), token_id.into(), int(now)],
            ))
            .await?;
        self.first(Stmt::new(
            sql::TOKEN_GET,
            vec![tenant_id.into(), token_id.into()],
        ))
        .await
    }

    pub async fn tokens_of(&self, tenant_id: &str) -> Result<Vec<TokenRow>, PortError> {
        self.db
            .query(Stmt::new(sql::TOKENS_OF_TENANT, vec![tenant_id.into()]))
            .await
    }

    /// The unrevoked token `token_id`, to compare its hash.
    pub async fn token_auth(&self, token_id: &str) -> Result<Option<TokenAuthRow>, PortError> {
        self.first(Stmt::new(sql::TOKEN_LOOKUP, vec![token_id.into()]))
            .await
    }

    /// Counts a request of an active tenant in `minute`; `None` if the
    /// tenant is not active, not served here (moved out, moving in) or
    /// made `default_max` (or its own quota) requests in that minute
    /// already.
    pub async fn take_request(
        &self,
        tenant_id: &str,
        minute: i64,
        default_max: u64,
    ) -> Result<Option<Taken>, PortError> {
        self.first(Stmt::new(
            sql::TENANT_TAKE_REQUEST,
            vec![tenant_id.into(), int(minute), int(default_max as i64)],
        ))
        .await
    }

    pub async fn tenant_usage(
        &self,
        tenant_id: &str,
        documents_max_default: u64,
        bytes_max_default: u64,
    ) -> Result<Option<TenantUsageRow>, PortError> {
        self.first(Stmt::new(
            sql::TENANT_USAGE,
            vec![
                tenant_id.into(),
                int(documents_max_default as i64),
                int(bytes_max_default as i64),
            ],
        ))
        .await
    }
}
