//! A bounded pool of worker threads (for `packs serve`): at most `max` jobs are taken at
//! once (running or waiting for a worker), on threads that are started when needed and then
//! kept for the next job. When the system refuses a new thread (`ulimit -u`, a cgroup's
//! `pids.max`), a job waits for a busy worker if there is one, and is refused with the
//! reason only when there is none. A job that panics is caught: its worker goes on.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Why a job was not taken.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refused {
    /// `max` jobs are already taken.
    #[error("{0} calls are running; try again when one ends")]
    Full(usize),
    /// No worker exists and none could be started.
    #[error("cannot start a thread for the call: {0}")]
    NoThread(std::io::Error),
}

/// The pool; [`Pool::close`] (or dropping it) waits for every worker to end.
pub(crate) struct Pool {
    shared: Arc<Shared>,
    handles: Mutex<Vec<JoinHandle<()>>>,
    name: &'static str,
    max: usize,
}

struct Shared {
    state: Mutex<State>,
    /// A job was queued, or the pool closed.
    work: Condvar,
    /// A job ended.
    done: Condvar,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    workers: usize,
    idle: usize,
    running: usize,
    /// Threads in [`Pool::wait_idle`]: a job's end wakes them only when there are some (a
    /// wake-up is a system call per job, whether anyone waits or not).
    waiting: usize,
    closed: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Pool {
    /// A pool of at most `max` jobs, on threads named `name`.
    pub(crate) fn new(name: &'static str, max: usize) -> Self {
        let shared = Arc::new(Shared { state: Mutex::default(), work: Condvar::new(), done: Condvar::new() });
        Self { shared, handles: Mutex::new(Vec::new()), name, max }
    }

    /// Take `job`: an idle worker runs it, or a new one, or (when no thread can be started)
    /// the next worker that finishes its job.
    pub(crate) fn submit(&self, job: impl FnOnce() + Send + 'static) -> Result<(), Refused> {
        let mut state = self.shared.lock();
        if state.queue.len() + state.running >= self.max {
            return Err(Refused::Full(self.max));
        }
        state.queue.push_back(Box::new(job));
        if state.idle >= state.queue.len() {
            self.shared.work.notify_one();
            return Ok(());
        }
        let shared = Arc::clone(&self.shared);
        match std::thread::Builder::new().name(self.name.into()).spawn(move || work(&shared)) {
            Ok(handle) => {
                state.workers += 1;
                self.handles.lock().unwrap_or_else(PoisonError::into_inner).push(handle);
                Ok(())
            }
            Err(_) if state.workers > 0 => Ok(()), // every worker takes jobs until none is left
            Err(e) => {
                state.queue.pop_back();
                Err(Refused::NoThread(e))
            }
        }
    }

    /// Wait until no job is queued or running, or until `deadline`; true when none is.
    pub(crate) fn wait_idle(&self, deadline: Instant) -> bool {
        let mut state = self.shared.lock();
        while state.running + state.queue.len() > 0 {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else { return false };
            state.waiting += 1;
            state = self.shared.done.wait_timeout(state, left).unwrap_or_else(PoisonError::into_inner).0;
            state.waiting -= 1;
        }
        true
    }

    /// Let the workers finish the jobs taken, then end them.
    pub(crate) fn close(&self) {
        self.shared.lock().closed = true;
        self.shared.work.notify_all();
        let handles = std::mem::take(&mut *self.handles.lock().unwrap_or_else(PoisonError::into_inner));
        for h in handles {
            let _ = h.join();
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.close();
    }
}

fn work(shared: &Shared) {
    let mut state = shared.lock();
    loop {
        if let Some(job) = state.queue.pop_front() {
            state.running += 1;
            drop(state);
            // The job answers for itself; a panic must not take the worker (or the lock) with it.
            let _ = catch_unwind(AssertUnwindSafe(job));
            state = shared.lock();
            state.running -= 1;
            if state.waiting > 0 {
                shared.done.notify_all();
            }
            continue;
        }
        if state.closed {
            state.workers -= 1;
            return;
        }
        state.idle += 1;
        state = shared.work.wait(state).unwrap_or_else(PoisonError::into_inner);
        state.idle -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn jobs_run_on_reused_workers_up_to_the_bound() {
        let pool = Pool::new("test", 2);
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let release_rx = Arc::new(Mutex::new(release_rx));
        for _ in 0..2 {
            let rx = Arc::clone(&release_rx);
            pool.submit(move || {
                let _ = rx.lock().unwrap().recv();
            })
            .unwrap();
        }
        assert!(matches!(pool.submit(|| {}), Err(Refused::Full(2))));
        release_tx.send(()).unwrap();
        release_tx.send(()).unwrap();
        assert!(pool.wait_idle(Instant::now() + Duration::from_secs(5)));
        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..10 {
            let ran = Arc::clone(&ran);
            pool.submit(move || {
                ran.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
            assert!(pool.wait_idle(Instant::now() + Duration::from_secs(5)));
        }
        assert_eq!(ran.load(Ordering::SeqCst), 10);
        assert!(pool.shared.lock().workers <= 2);
        pool.close();
        assert_eq!(pool.shared.lock().workers, 0);
    }

    #[test]
    fn a_panicking_job_leaves_its_worker_working() {
        let pool = Pool::new("test", 1);
        pool.submit(|| panic!("boom")).unwrap();
        assert!(pool.wait_idle(Instant::now() + Duration::from_secs(5)));
        let (tx, rx) = mpsc::channel();
        pool.submit(move || tx.send(7).unwrap()).unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(7));
        assert_eq!(pool.shared.lock().workers, 1);
    }
}
