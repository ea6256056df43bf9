//! Panics: what they log, and which queue message they belong to.
//!
//! A panic aborts the Wasm instance (`panic = "abort"`); worker-build's glue
//! then starts a fresh one for the next call. Two things are done here:
//!
//! - The panic hook logs one fixed event, `panic`, with the source location
//!   only. Rust's own message (and worker's default hook, which prints it)
//!   can quote document text, so it is never printed.
//! - The hook tells the JS entry point (`entry.mjs`) which queue message
//!   was being consumed: every consume future runs inside [`Tagged`], which
//!   names its message while it is polled. The entry point then asks a
//!   fresh instance to end that job `failed` with `internal_error`
//!   ([`crate::pipeline::Pipeline::end_crashed`]) instead of letting the
//!   job wait out its lease and crash again.

use crate::pipeline::log_event;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use wasm_bindgen::JsValue;

thread_local! {
    static HOOK_INSTALLED: Cell<bool> = const { Cell::new(false) };
    /// The queue message whose consume is being polled right now.
    static CURRENT_MESSAGE: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs the content-free panic hook (once per instance: a fresh
/// instance after a panic starts without it). Call it first in every entry
/// point.
pub fn install_hook() {
    if HOOK_INSTALLED.with(|i| i.replace(true)) {
        return;
    }
    std::panic::set_hook(Box::new(|info| {
        let location = info.location();
        let message_id = CURRENT_MESSAGE.with(|c| c.borrow().clone());
        log_event(
            "panic",
            serde_json::json!({
                "bucket": "internal_error",
                "file": location.map(|l| l.file()),
                "line": location.map(|l| l.line()),
                "column": location.map(|l| l.column()),
                "message_id": message_id,
            }),
        );
        if let Some(id) = message_id {
            signal_panicked(&id);
        }
    }));
}

/// Calls `globalThis.__ingestConsume.panicked(id)`, set by `entry.mjs`; JS
/// state outlives the Wasm instance. Never panics (it runs inside the hook).
fn signal_panicked(message_id: &str) {
    let global = js_sys::global();
    let Ok(state) = js_sys::Reflect::get(&global, &JsValue::from_str("__ingestConsume")) else {
        return;
    };
    if !state.is_object() {
        return;
    }
    let Ok(f) = js_sys::Reflect::get(&state, &JsValue::from_str("panicked")) else {
        return;
    };
    if let Some(f) = wasm_bindgen::JsCast::dyn_ref::<js_sys::Function>(&f) {
        let _ = f.call1(&state, &JsValue::from_str(message_id));
    }
}

/// A future that names its queue message while it is polled, so that a
/// panic inside it is attributed to that message (and to no other message
/// consumed concurrently by the same instance).
pub struct Tagged<F> {
    message_id: String,
    inner: Pin<Box<F>>,
}

impl<F: Future> Tagged<F> {
    pub fn new(message_id: String, inner: F) -> Self {
        Tagged {
            message_id,
            inner: Box::pin(inner),
        }
    }
}

impl<F: Future> Future for Tagged<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let previous = CURRENT_MESSAGE.with(|c| c.replace(Some(this.message_id.clone())));
        let out = this.inner.as_mut().poll(cx);
        CURRENT_MESSAGE.with(|c| *c.borrow_mut() = previous);
        out
    }
}
