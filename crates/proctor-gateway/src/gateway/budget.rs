//! How many bytes of request bodies the gateway holds at once: a budget for the whole gateway
//! and one for each trial. A request takes room for each piece of its body before the piece is
//! read (so the socket, not proctor's memory, holds what waits) and gives it back when its
//! exchange is filed. A request that finds no room within [`Budgets::wait`] is refused as
//! overloaded, in its API's shape.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Incoming};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::api_error::Refusal;

/// The room taken at a time while reading a body of unknown length.
const STEP: usize = 1 << 20;

/// How long a body may go without sending a byte before the request is refused.
const BODY_IDLE: Duration = Duration::from_secs(30);

/// The gateway's budget and how long a request waits for room in it.
#[derive(Debug)]
pub(crate) struct Budgets {
    /// Bytes of request bodies held at once across every trial.
    pub global: Arc<Semaphore>,
    /// How long a request waits for room before it is refused.
    pub wait: Duration,
}

/// A budget of `bytes`, never less than one request of `max_request` bytes (or it could never
/// be served).
pub(crate) fn semaphore(bytes: usize, max_request: usize) -> Arc<Semaphore> {
    Arc::new(Semaphore::new(
        bytes.max(max_request).min(Semaphore::MAX_PERMITS),
    ))
}

/// Room held in the global budget and in one trial's budget, in bytes; given back on drop.
#[derive(Debug, Default)]
pub(crate) struct Held {
    bytes: usize,
    global: Option<OwnedSemaphorePermit>,
    trial: Option<OwnedSemaphorePermit>,
}

impl Held {
    /// The bytes held.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Takes `more` bytes in both budgets, waiting up to `wait` for them.
    async fn grow(
        &mut self,
        more: usize,
        budgets: &Budgets,
        trial: &Arc<Semaphore>,
    ) -> Result<(), (Refusal, String)> {
        let n = u32::try_from(more).unwrap_or(u32::MAX);
        let take = async {
            // The trial's room first: a trial that fills its own budget waits without holding
            // room that other trials could use.
            let t = Arc::clone(trial).acquire_many_owned(n).await;
            let g = Arc::clone(&budgets.global).acquire_many_owned(n).await;
            (t, g)
        };
        let overloaded = || {
            (
                Refusal::Overloaded,
                format!(
                    "proctor gateway: no room for this request's body within {} s (the gateway \
                     holds a bounded number of request bytes at once); try again",
                    budgets.wait.as_secs()
                ),
            )
        };
        match tokio::time::timeout(budgets.wait, take).await {
            Ok((Ok(t), Ok(g))) => {
                merge(&mut self.trial, t);
                merge(&mut self.global, g);
                self.bytes += n as usize;
                Ok(())
            }
            _ => Err(overloaded()),
        }
    }
}

fn merge(slot: &mut Option<OwnedSemaphorePermit>, more: OwnedSemaphorePermit) {
    match slot {
        Some(p) => p.merge(more),
        None => *slot = Some(more),
    }
}

/// Reads the whole body, at most `max` bytes, taking room for it in `budgets` and the trial's
/// budget `trial` as it goes. A body whose declared length is over `max` is refused unread.
pub(crate) async fn read_body(
    mut body: Incoming,
    max: usize,
    budgets: &Budgets,
    trial: &Arc<Semaphore>,
) -> Result<(Bytes, Held), (Refusal, String)> {
    let too_large = || {
        (
            Refusal::TooLarge,
            format!("proctor gateway: request body over {max} bytes"),
        )
    };
    let declared = body.size_hint().exact();
    if declared.is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    let mut held = Held::default();
    // Room for what is declared, or a first step; a body of unknown length takes more as it
    // arrives.
    let first = declared.map_or(STEP.min(max), |n| n as usize);
    held.grow(first, budgets, trial).await?;
    let mut out = Vec::with_capacity(declared.unwrap_or(0) as usize);
    loop {
        let frame = match tokio::time::timeout(BODY_IDLE, body.frame()).await {
            Err(_) => {
                return Err((
                    Refusal::BadRequest,
                    format!(
                        "proctor gateway: the request body sent nothing for {} s",
                        BODY_IDLE.as_secs()
                    ),
                ))
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                return Err((
                    Refusal::BadRequest,
                    format!("proctor gateway: cannot read the request body: {e}"),
                ))
            }
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let len = out.len() + data.len();
        if len > max {
            return Err(too_large());
        }
        if len > held.bytes {
            let more = (len - held.bytes).max(STEP).min(max - held.bytes);
            held.grow(more, budgets, trial).await?;
        }
        out.extend_from_slice(&data);
    }
    Ok((Bytes::from(out), held))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budgets(global: usize, wait_ms: u64) -> Budgets {
        Budgets {
            global: Arc::new(Semaphore::new(global)),
            wait: Duration::from_millis(wait_ms),
        }
    }

    #[tokio::test]
    async fn room_is_taken_from_both_budgets_and_given_back_on_drop() {
        let b = budgets(100, 10);
        let trial = Arc::new(Semaphore::new(60));
        let mut held = Held::default();
        held.grow(40, &b, &trial).await.unwrap();
        held.grow(20, &b, &trial).await.unwrap();
        assert_eq!(held.bytes(), 60);
        assert_eq!(
            (b.global.available_permits(), trial.available_permits()),
            (40, 0)
        );
        // The trial's budget is full: more waits, then is refused as overloaded.
        let mut other = Held::default();
        let e = other.grow(1, &b, &trial).await.unwrap_err();
        assert_eq!(e.0, Refusal::Overloaded);
        assert_eq!(
            b.global.available_permits(),
            40,
            "a refused wait holds nothing"
        );
        drop(held);
        assert_eq!(
            (b.global.available_permits(), trial.available_permits()),
            (100, 60)
        );
    }

    #[tokio::test]
    async fn a_full_global_budget_holds_every_trial_back() {
        let b = budgets(10, 10);
        let (t1, t2) = (Arc::new(Semaphore::new(10)), Arc::new(Semaphore::new(10)));
        let mut a = Held::default();
        a.grow(10, &b, &t1).await.unwrap();
        let mut c = Held::default();
        assert!(c.grow(1, &b, &t2).await.is_err());
        assert_eq!(
            t2.available_permits(),
            10,
            "the trial's room is not kept either"
        );
    }
}
