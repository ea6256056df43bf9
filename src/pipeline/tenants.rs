//! Tenants: the operator creates, lists, disables and enables them and
//! mints and revokes their tokens; every tenant request is authenticated
//! (a token to its tenant and scopes) and admitted (an active tenant,
//! within its requests per minute) here.

use super::{log_event, Outcome, Pipeline, Refused};
use crate::core::credentials::{self, MintedToken, Scopes};
use crate::core::ids::TenantId;
use crate::core::state::{TenantMoveState, TenantState};
use crate::ports::{Clock, Database, Embedder, JobQueue, PortError, VectorIndex};
use crate::store::{Quotas, TenantRow, TokenRow};
use serde::Serialize;
use serde_json::json;

/// A tenant as the operator sees it: state, quotas in force, usage.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TenantView {
    pub tenant_id: String,
    /// The shard that holds it.
    pub shard: u16,
    pub state: TenantState,
    pub quotas: QuotasView,
    pub usage: TenantUsage,
    /// Tokens not revoked.
    pub tokens: u64,
    pub created_at: i64,
    pub updated_at: i64,
    /// Its part in a move between shards, on this shard (absent: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moving: Option<TenantMoveState>,
}

/// The quotas in force, and whether each is the tenant's own or the
/// configured default.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QuotasView {
    pub documents_max: u64,
    pub bytes_max: u64,
    pub requests_per_minute_max: u64,
    /// Which of them are the configured defaults (`TENANT_*`).
    pub defaults: Vec<&'static str>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TenantUsage {
    /// Documents whose latest version is not a delete.
    pub documents: i64,
    /// Text bytes of those latest versions.
    pub bytes: i64,
    /// Requests admitted in the current clock minute.
    pub requests_this_minute: u64,
    /// D1 rows its jobs read and wrote, as D1 billed them (the sums of
    /// its jobs' `usage.d1_rows`).
    pub d1_rows: super::views::D1Rows,
}

/// A token as listed: never the token, never its hash.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TokenView {
    pub token_id: String,
    pub tenant_id: String,
    pub scopes: Vec<&'static str>,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
}

impl TokenView {
    fn from_row(r: TokenRow) -> TokenView {
        TokenView {
            scopes: Scopes::from_json(&r.scopes).names(),
            token_id: r.token_id,
            tenant_id: r.tenant_id,
            created_at: r.created_at,
            revoked_at: r.revoked_at,
        }
    }
}

/// A token just minted: the only time the token itself is shown.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NewToken {
    pub token_id: String,
    pub tenant_id: String,
    pub token: String,
    pub scopes: Vec<&'static str>,
    pub created_at: i64,
}

/// Whom a bearer token speaks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenGrant {
    /// A live token of an active tenant.
    Granted { tenant: TenantId, scopes: Scopes },
    /// A live token of a disabled tenant.
    TenantDisabled,
    /// No such token (never minted, revoked, or a wrong secret).
    Invalid,
}

/// Whether a tenant's request is let in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Admitted here. `fenced`: the tenant is being moved off this shard
    /// and takes no writes here; the caller asks the directory again (it
    /// may have switched) before it is served here.
    Admitted {
        fenced: bool,
    },
    TenantDisabled,
    /// The tenant is not served here: moved to another shard, or its copy
    /// is moving in. The caller asks the directory again.
    Moved,
    /// Its requests of this minute are used up: retry after this long.
    RateLimited {
        retry_after_seconds: u64,
    },
}

const MINUTE_MS: i64 = 60_000;

impl<D: Database, V: VectorIndex, E: Embedder, Q: JobQueue, C: Clock> Pipeline<D, V, E, Q, C> {
    fn tenant_view(&self, r: TenantRow) -> TenantView {
        let minute = self.clock.now_ms().div_euclid(MINUTE_MS);
        let mut defaults = Vec::new();
        let mut pick = |own: Option<u64>, default: u64, name: &'static str| {
            own.unwrap_or_else(|| {
                defaults.push(name);
                default
            })
        };
        let documents_max = pick(
            r.documents_max,
            self.cfg.tenant_documents_max,
            "documents_max",
        );
        let bytes_max = pick(r.bytes_max, self.cfg.tenant_bytes_max, "bytes_max");
        let requests_per_minute_max = pick(
            r.requests_per_minute_max,
            self.cfg.tenant_requests_per_minute,
            "requests_per_minute_max",
        );
        TenantView {
            quotas: QuotasView {
                documents_max,
                bytes_max,
                requests_per_minute_max,
                defaults,
            },
            usage: TenantUsage {
                documents: r.documents,
                bytes: r.bytes,
                requests_this_minute: if r.rate_minute == minute {
                    r.rate_requests
                } else {
                    0
                },
                d1_rows: super::views::D1Rows {
                    read: r.d1_rows_read,
                    written: r.d1_rows_written,
                },
            },
            tenant_id: r.tenant_id,
            shard: self.shard.0,
            state: r.state,
            tokens: r.tokens,
            created_at: r.created_at,
            updated_at: r.updated_at,
            moving: r.move_state,
        }
    }

    /// Why a change of `tenant`'s row, tokens or state changed nothing:
    /// no such tenant, or its move holds them (fenced, moved out, moving
    /// in: migration 0033).
    async fn unchanged(&self, tenant: &TenantId) -> Result<Refused, PortError> {
        Ok(match self.store.tenant(tenant.as_str()).await? {
            Some(r) if r.move_state.is_some_and(|m| m != TenantMoveState::Copying) => {
                Refused::TenantMoving
            }
            Some(_) => Refused::TokenNotFound,
            None => Refused::TenantNotFound,
        })
    }

    /// Creates an active tenant with `quotas` (`None`: the defaults).
    pub async fn create_tenant(
        &self,
        tenant: &TenantId,
        quotas: &Quotas,
    ) -> Result<Outcome<TenantView>, PortError> {
        let now = self.clock.now_ms();
        let max = self.cfg.tenants_max;
        if !self
            .store
            .create_tenant(tenant.as_str(), quotas, max, now)
            .await?
        {
            return Ok(Err(match self.store.tenant(tenant.as_str()).await? {
                Some(_) => Refused::TenantExists,
                None => Refused::TenantLimit { max },
            }));
        }
        log_event("tenant_created", json!({ "tenant_id": tenant.as_str() }));
        self.tenant_or_missing(tenant).await
    }

    pub async fn tenant(&self, tenant: &TenantId) -> Result<Option<TenantView>, PortError> {
        let row = self.store.tenant(tenant.as_str()).await?;
        Ok(row.map(|r| self.tenant_view(r)))
    }

    async fn tenant_or_missing(&self, tenant: &TenantId) -> Result<Outcome<TenantView>, PortError> {
        Ok(self.tenant(tenant).await?.ok_or(Refused::TenantNotFound))
    }

    /// Tenants after `cursor` (a tenant ID, '' first), at most `limit`.
    pub async fn tenants(&self, cursor: &str, limit: usize) -> Result<Vec<TenantView>, PortError> {
        let rows = self.store.tenants_page(cursor, limit).await?;
        Ok(rows.into_iter().map(|r| self.tenant_view(r)).collect())
    }

    /// The tenants named that this shard holds, in ID order.
    pub async fn tenants_by_ids(&self, ids: &[String]) -> Result<Vec<TenantView>, PortError> {
        let rows = self.store.tenants_by_ids(ids).await?;
        Ok(rows.into_iter().map(|r| self.tenant_view(r)).collect())
    }

    /// Disables or enables a tenant. A disabled tenant's tokens are refused
    /// at once; its data is kept, and its queued jobs still run.
    pub async fn set_tenant_state(
        &self,
        tenant: &TenantId,
        state: TenantState,
    ) -> Result<Outcome<TenantView>, PortError> {
        let now = self.clock.now_ms();
        if !self
            .store
            .set_tenant_state(tenant.as_str(), state, now)
            .await?
        {
            return Ok(Err(self.unchanged(tenant).await?));
        }
        log_event(
            "tenant_state",
            json!({ "tenant_id": tenant.as_str(), "state": state.as_str() }),
        );
        self.tenant_or_missing(tenant).await
    }

    /// Replaces a tenant's quotas (`None`: the configured default). A quota
    /// lowered under what the tenant stores refuses growth from then on; it
    /// deletes nothing.
    pub async fn set_tenant_quotas(
        &self,
        tenant: &TenantId,
        quotas: &Quotas,
    ) -> Result<Outcome<TenantView>, PortError> {
        let now = self.clock.now_ms();
        if !self
            .store
            .set_tenant_quotas(tenant.as_str(), quotas, now)
            .await?
        {
            return Ok(Err(self.unchanged(tenant).await?));
        }
        log_event("tenant_quotas", json!({ "tenant_id": tenant.as_str() }));
        self.tenant_or_missing(tenant).await
    }

    /// Mints a token of `tenant` from `entropy` (32 random bytes the entry
    /// point draws): only its hash is stored.
    pub async fn mint_token(
        &self,
        tenant: &TenantId,
        scopes: &Scopes,
        entropy: &[u8; 32],
    ) -> Result<Outcome<NewToken>, PortError> {
        let now = self.clock.now_ms();
        let MintedToken { token_id, token } = credentials::mint(entropy);
        let hash = credentials::token_hash(&token);
        if !self
            .store
            .insert_token(&token_id, tenant.as_str(), &hash, &scopes.to_json(), now)
            .await?
        {
            return Ok(Err(self.unchanged(tenant).await?));
        }
        log_event(
            "token_minted",
            json!({ "tenant_id": tenant.as_str(), "token_id": token_id }),
        );
        Ok(Ok(NewToken {
            token_id,
            tenant_id: tenant.as_str().to_string(),
            token,
            scopes: scopes.names(),
            created_at: now,
        }))
    }

    /// Revokes a token of `tenant`: the next request with it is refused.
    pub async fn revoke_token(
        &self,
        tenant: &TenantId,
        token_id: &str,
    ) -> Result<Outcome<TokenView>, PortError> {
        if self.store.tenant(tenant.as_str()).await?.is_none() {
            return Ok(Err(Refused::TenantNotFound));
        }
        let now = self.clock.now_ms();
        let row = self
            .store
            .revoke_token(tenant.as_str(), token_id, now)
            .await?;
        if row.is_some() {
            log_event(
                "token_revoked",
                json!({ "tenant_id": tenant.as_str(), "token_id": token_id }),
            );
        }
        match row {
            Some(row) => Ok(Ok(TokenView::from_row(row))),
            None => Ok(Err(self.unchanged(tenant).await?)),
        }
    }

    /// A tenant's tokens (none of their secrets).
    pub async fn tokens(&self, tenant: &TenantId) -> Result<Outcome<Vec<TokenView>>, PortError> {
        if self.store.tenant(tenant.as_str()).await?.is_none() {
            return Ok(Err(Refused::TenantNotFound));
        }
        let rows = self.store.tokens_of(tenant.as_str()).await?;
        Ok(Ok(rows.into_iter().map(TokenView::from_row).collect()))
    }

    /// Whom `token` speaks for: looked up by the ID inside it, then its
    /// hash compared in constant time (the ledger holds only hashes).
    pub async fn token_grant(&self, token: &str) -> Result<TokenGrant, PortError> {
        let Some(token_id) = credentials::token_id_of(token) else {
            return Ok(TokenGrant::Invalid);
        };
        let Some(row) = self.store.token_auth(token_id).await? else {
            return Ok(TokenGrant::Invalid);
        };
        if !credentials::token_matches(token, &row.token_hash) {
            return Ok(TokenGrant::Invalid);
        }
        let Some(tenant) = TenantId::parse(&row.tenant_id) else {
            return Ok(TokenGrant::Invalid);
        };
        Ok(match row.state {
            TenantState::Active => TokenGrant::Granted {
                tenant,
                scopes: Scopes::from_json(&row.scopes),
            },
            TenantState::Disabled => TokenGrant::TenantDisabled,
        })
    }

    /// Counts one request of `tenant` against its requests per minute.
    pub async fn admit(&self, tenant: &TenantId) -> Result<Admission, PortError> {
        let now = self.clock.now_ms();
        let minute = now.div_euclid(MINUTE_MS);
        let default_max = self.cfg.tenant_requests_per_minute;
        if let Some(taken) = self
            .store
            .take_request(tenant.as_str(), minute, default_max)
            .await?
        {
            return Ok(Admission::Admitted {
                fenced: taken.move_state == Some(TenantMoveState::Fenced),
            });
        }
        // Not admitted: moved, disabled (or absent), or out of requests
        // this minute.
        match self.store.tenant(tenant.as_str()).await? {
            Some(r)
                if matches!(
                    r.move_state,
                    Some(TenantMoveState::Moved | TenantMoveState::MovingIn)
                ) =>
            {
                Ok(Admission::Moved)
            }
            Some(r) if r.state == TenantState::Active => {
                log_event(
                    "rate_limited",
                    json!({ "tenant_id": tenant.as_str(), "requests": r.rate_requests }),
                );
                let left_ms = MINUTE_MS - now.rem_euclid(MINUTE_MS);
                Ok(Admission::RateLimited {
                    retry_after_seconds: (left_ms as u64).div_ceil(1000),
                })
            }
            _ => Ok(Admission::TenantDisabled),
        }
    }
}
