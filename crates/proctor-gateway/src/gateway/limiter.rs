//! Adaptive per-provider concurrency (AIMD): at most `limit` requests in flight; the limit is
//! halved on a 429 and raised by one after a run of successes, never below 1 nor above the
//! provider's `max_concurrency`.

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

/// The in-flight limit of one provider, shared by every trial.
#[derive(Debug)]
pub(crate) struct AdaptiveLimiter {
    state: Mutex<State>,
    notify: Notify,
    max: usize,
    increase_after: u32,
}

#[derive(Debug)]
struct State {
    limit: usize,
    in_flight: usize,
    successes: u32,
}

/// A place among the requests in flight; freed on drop.
#[derive(Debug)]
pub(crate) struct Permit {
    limiter: Arc<AdaptiveLimiter>,
}

impl AdaptiveLimiter {
    /// A limiter starting at `max` (at least 1) that adds one place after `increase_after`
    /// successes in a row (at least 1).
    pub fn new(max: usize, increase_after: u32) -> Arc<Self> {
        let max = max.max(1);
        Arc::new(AdaptiveLimiter {
            state: Mutex::new(State {
                limit: max,
                in_flight: 0,
                successes: 0,
            }),
            notify: Notify::new(),
            max,
            increase_after: increase_after.max(1),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for a place.
    pub async fn acquire(self: &Arc<Self>) -> Permit {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut s = self.lock();
                if s.in_flight < s.limit {
                    s.in_flight += 1;
                    return Permit {
                        limiter: Arc::clone(self),
                    };
                }
            }
            notified.await;
        }
    }

    /// A request succeeded: after enough in a row, one more place.
    pub fn on_success(&self) {
        let mut s = self.lock();
        s.successes += 1;
        if s.successes >= self.increase_after {
            s.successes = 0;
            if s.limit < self.max {
                s.limit += 1;
                drop(s);
                self.notify.notify_one();
            }
        }
    }

    /// The provider answered 429: half the places (at least one).
    pub fn on_rate_limit(&self) {
        let mut s = self.lock();
        s.limit = (s.limit / 2).max(1);
        s.successes = 0;
    }

    /// The current limit.
    pub fn limit(&self) -> usize {
        self.lock().limit
    }

    /// Requests in flight now.
    #[cfg(test)]
    pub fn in_flight(&self) -> usize {
        self.lock().in_flight
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut s = self.limiter.lock();
        s.in_flight = s.in_flight.saturating_sub(1);
        drop(s);
        self.limiter.notify.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    #[test]
    fn halves_on_rate_limit_and_climbs_back_slowly() {
        let l = AdaptiveLimiter::new(8, 3);
        l.on_rate_limit();
        assert_eq!(l.limit(), 4);
        l.on_rate_limit();
        l.on_rate_limit();
        l.on_rate_limit();
        l.on_rate_limit();
        assert_eq!(l.limit(), 1, "never below one");
        l.on_success();
        l.on_success();
        assert_eq!(l.limit(), 1);
        l.on_success();
        assert_eq!(l.limit(), 2);
        for _ in 0..100 {
            l.on_success();
        }
        assert_eq!(l.limit(), 8, "never above max");
    }

    #[test]
    fn waits_when_full_and_wakes_on_release() {
        rt().block_on(async {
            let l = AdaptiveLimiter::new(2, 1);
            let a = l.acquire().await;
            let _b = l.acquire().await;
            assert_eq!(l.in_flight(), 2);
            let waiter = {
                let l = Arc::clone(&l);
                tokio::spawn(async move { l.acquire().await })
            };
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert!(!waiter.is_finished());
            drop(a);
            let c = tokio::time::timeout(Duration::from_secs(5), waiter)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(l.in_flight(), 2);
            drop(c);
            assert_eq!(l.in_flight(), 1);
        });
    }

    #[test]
    fn a_lowered_limit_holds_new_requests_until_enough_finish() {
        rt().block_on(async {
            let l = AdaptiveLimiter::new(4, 1000);
            let mut held: Vec<Permit> = Vec::new();
            for _ in 0..4 {
                held.push(l.acquire().await);
            }
            l.on_rate_limit();
            assert_eq!(l.limit(), 2);
            let waiter = {
                let l = Arc::clone(&l);
                tokio::spawn(async move { l.acquire().await })
            };
            held.pop();
            held.pop();
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert!(!waiter.is_finished(), "2 in flight at limit 2");
            held.pop();
            tokio::time::timeout(Duration::from_secs(5), waiter)
                .await
                .unwrap()
                .unwrap();
        });
    }
}
