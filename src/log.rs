//! Structured log lines, and where they go.
//!
//! [`log_event`] builds one JSON line from an event name and allow-listed
//! fields; the sink that writes it is the platform's, installed by the entry
//! points ([`set_sink`]): the Worker's `console.log` (`src/wasm/`), stderr
//! when `INGEST_LOG` is set (`src/native/`). Until one is installed, lines
//! are dropped.
//!
//! A leaf: imports nothing from the crate; any module may import it.

use std::sync::OnceLock;

static SINK: OnceLock<fn(&str)> = OnceLock::new();

/// Installs the sink every later line is written to. The first one
/// installed stays (an instance, or a test process, has one platform).
pub fn set_sink(sink: fn(&str)) {
    let _ = SINK.set(sink);
}

/// One structured log line: an event name and allow-listed fields only
/// (buckets, codes, ids, counts), never raw error text or document content.
pub fn log_event(event: &str, fields: serde_json::Value) {
    let mut line = serde_json::json!({ "event": event });
    if let (Some(obj), serde_json::Value::Object(extra)) = (line.as_object_mut(), fields) {
        obj.extend(extra);
    }
    emit(&line.to_string());
}

fn emit(line: &str) {
    if let Some(sink) = SINK.get() {
        sink(line);
    }
}
