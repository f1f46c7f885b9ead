//! The async entry point (feature `async`): [`AsyncCall`], a call taken through the same
//! pipeline on tokio's blocking pool, cancelled when its future is dropped.
//!
//! The pipeline is synchronous (a process is polled, a person may be asked): an async
//! caller gets it by `spawn_blocking`, with owned parts (the blocking task outlives any
//! borrow of the caller's) and a [`CancelToken`] the future's drop sets. The token does
//! what it does for a synchronous call: it kills a process tool's whole group (the
//! runner's kill, as on a timeout) or sets a native tool's token.

use std::sync::Arc;

use serde_json::Value;

use crate::call::{Approver, Call, Context, DenyAll, Status, ToolError, ToolResult};
use crate::catalog::Catalog;
use crate::native::CancelToken;

/// A status callback an [`AsyncCall`] can carry to the blocking pool.
type OnStatus = Arc<dyn Fn(Status<'_>) + Send + Sync>;

/// One call of a tool by name for an async caller (feature `async`): the same pipeline as
/// [`Call`], run on tokio's blocking pool. Dropping the future [`AsyncCall::run`] returns
/// cancels the call, as cancelling its token ([`AsyncCall::cancel_token`]) does: a process
/// tool's whole process group is killed, a native tool's token is set. A call already
/// cancelled goes on to its end on the pool (the audit log records it as `cancelled`).
///
/// ```no_run
/// # async fn f() -> Result<(), packs::ToolError> {
/// use std::sync::Arc;
/// use packs::{AsyncCall, Catalog, Context, SearchPath};
/// let catalog = Arc::new(Catalog::load(&SearchPath::dirs(["packs"])));
/// let result = AsyncCall::new("disk_usage", serde_json::json!({"path": "."}))
///     .context(Arc::new(Context::new()))
///     .run(catalog)
///     .await?;
/// # Ok(()) }
/// ```
#[must_use = "a call does nothing until it is run"]
pub struct AsyncCall {
    name: String,
    args: Value,
    context: Option<Arc<Context>>,
    approver: Arc<dyn Approver + Send + Sync>,
    on_status: Option<OnStatus>,
    cancel: Option<CancelToken>,
}

impl std::fmt::Debug for AsyncCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncCall").field("name", &self.name).field("args", &self.args).finish_non_exhaustive()
    }
}

impl AsyncCall {
    /// A call of the tool `name` with `args` (as [`Call::new`]): an empty [`Context`] and
    /// calls that need approval denied unless set otherwise.
    pub fn new(name: impl Into<String>, args: Value) -> Self {
        Self { name: name.into(), args, context: None, approver: Arc::new(DenyAll), on_status: None, cancel: None }
    }

    /// Make the call with `context` (as [`Call::context`]).
    pub fn context(mut self, context: Arc<Context>) -> Self {
        self.context = Some(context);
        self
    }

    /// Ask `approver` when the rules say a call needs a person's approval (it is asked on
    /// the blocking pool: it may block).
    pub fn approver(mut self, approver: Arc<dyn Approver + Send + Sync>) -> Self {
        self.approver = approver;
        self
    }

    /// Report each phase, the process, output and a native tool's progress to `on_status`
    /// (as [`Call::on_status`]; it is called on the blocking pool).
    pub fn on_status(mut self, on_status: impl Fn(Status<'_>) + Send + Sync + 'static) -> Self {
        self.on_status = Some(Arc::new(on_status));
        self
    }

    /// Cancel the call when `token` is cancelled (as [`Call::cancel_token`]). The token is
    /// the caller's: dropping the future cancels this call alone, not the token.
    pub fn cancel_token(mut self, token: CancelToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// Take the call through the whole pipeline on tokio's blocking pool and run the tool;
    /// the same result as [`Call::run`]. Dropping the future cancels the call.
    ///
    /// # Panics
    ///
    /// When the pipeline panicked (the panic goes on in the caller), or the runtime shut
    /// down before the call started.
    pub async fn run(self, catalog: Arc<Catalog>) -> Result<ToolResult, ToolError> {
        // This call's own token: set by the caller's, and by the future's drop.
        let token = CancelToken::new();
        let linked = self.cancel.as_ref().map(|caller| {
            let token = token.clone();
            (caller.clone(), caller.on_cancel(move || token.cancel()))
        });
        let guard = CancelOnDrop(Some(token.clone()));
        let Self { name, args, context, approver, on_status, cancel: _ } = self;
        let task = tokio::task::spawn_blocking(move || {
            let mut call = Call::new(&name, args).approver(&*approver).cancel_token(&token);
            if let Some(context) = &context {
                call = call.context(context);
            }
            if let Some(on_status) = &on_status {
                call = call.on_status(&**on_status);
            }
            call.run(&catalog)
        });
        let joined = task.await;
        guard.disarm();
        if let Some((caller, hook)) = linked {
            caller.forget(hook);
        }
        match joined {
            Ok(result) => result,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => panic!("the call could not run on tokio's blocking pool: {e}"),
        }
    }
}

/// Cancels its token when dropped before [`CancelOnDrop::disarm`]: the future was dropped.
struct CancelOnDrop(Option<CancelToken>);

impl CancelOnDrop {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(token) = self.0.take() {
            token.cancel();
        }
    }
}
