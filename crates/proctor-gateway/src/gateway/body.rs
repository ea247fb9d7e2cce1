//! Response bodies the gateway sends: whole ones it made or buffered, and upstream bodies
//! passed through frame by frame while the exchange taps them.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use tokio::time::{Instant, Sleep};

use super::exchange::Exchange;
use super::scrub::Scrubber;
use crate::ledger::Ending;

/// What can go wrong while sending a body.
pub(crate) type BodyError = Box<dyn std::error::Error + Send + Sync>;

/// A response body to the agent.
#[derive(Debug)]
pub(crate) enum GatewayBody {
    /// A whole body (errors, refusals, buffered upstream errors).
    Full(Option<Bytes>),
    /// An upstream body streamed through.
    Tap(Box<TapBody>),
}

impl GatewayBody {
    /// A whole body.
    pub fn full(bytes: impl Into<Bytes>) -> Self {
        GatewayBody::Full(Some(bytes.into()))
    }
}

/// An upstream body passed through as it arrives; every frame is shown to the exchange, which
/// is finished when the body ends, breaks, stalls past the idle timeout, or is dropped. What
/// reaches the agent has the real key masked ([`Scrubber`]).
#[derive(Debug)]
pub(crate) struct TapBody {
    upstream: Incoming,
    exchange: Option<Exchange>,
    idle: Duration,
    timer: Pin<Box<Sleep>>,
    scrub: Scrubber,
    /// A trailers frame that waits for the bytes held back before it.
    trailers: Option<Frame<Bytes>>,
}

impl TapBody {
    /// Taps `upstream` for `exchange`; more than `idle` without a frame ends it as a timeout.
    pub fn new(upstream: Incoming, exchange: Exchange, idle: Duration) -> Self {
        let scrub = Scrubber::new(exchange.trial.needles.clone());
        TapBody {
            upstream,
            exchange: Some(exchange),
            idle,
            timer: Box::pin(tokio::time::sleep(idle)),
            scrub,
            trailers: None,
        }
    }

    fn end(&mut self, ending: Ending, error: Option<String>) {
        if let Some(mut ex) = self.exchange.take() {
            if let Some(e) = error {
                ex.error.get_or_insert(e);
            }
            ex.finish(ending);
        }
    }
}

impl Body for GatewayBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match self.get_mut() {
            GatewayBody::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            GatewayBody::Tap(tap) => tap.as_mut().poll(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            GatewayBody::Full(bytes) => bytes.is_none(),
            GatewayBody::Tap(tap) => tap.exchange.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            GatewayBody::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            GatewayBody::Full(None) => SizeHint::with_exact(0),
            GatewayBody::Tap(tap) => tap.upstream.size_hint(),
        }
    }
}

impl TapBody {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        if let Some(trailers) = self.trailers.take() {
            return Poll::Ready(Some(Ok(trailers)));
        }
        if self.exchange.is_none() {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.upstream).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(data), Some(ex)) = (frame.data_ref(), self.exchange.as_mut()) {
                    ex.on_data(data);
                }
                let ended = self.upstream.is_end_stream();
                let frame = match frame.into_data() {
                    Ok(data) => {
                        let out = self.scrub.push(&data);
                        if ended {
                            Frame::data([out, self.scrub.finish()].concat().into())
                        } else {
                            Frame::data(out)
                        }
                    }
                    // Trailers come after every byte: what was held back goes first.
                    Err(trailers) => {
                        let held = self.scrub.finish();
                        if held.is_empty() {
                            trailers
                        } else {
                            self.trailers = Some(trailers);
                            Frame::data(held)
                        }
                    }
                };
                // A body of known length is over with its last byte: the server may not poll
                // again for the end, so it is complete now, not closed by the client later.
                if ended {
                    self.end(Ending::Complete, None);
                } else {
                    self.timer.as_mut().reset(Instant::now() + self.idle);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                let message = format!("the upstream response broke off: {e}");
                self.end(Ending::UpstreamBroke, Some(message.clone()));
                Poll::Ready(Some(Err(message.into())))
            }
            Poll::Ready(None) => {
                self.end(Ending::Complete, None);
                let held = self.scrub.finish();
                if held.is_empty() {
                    Poll::Ready(None)
                } else {
                    Poll::Ready(Some(Ok(Frame::data(held))))
                }
            }
            Poll::Pending => {
                if self.timer.as_mut().poll(cx).is_ready() {
                    let message =
                        format!("the upstream sent nothing for {} ms", self.idle.as_millis());
                    self.end(Ending::IdleTimeout, Some(message.clone()));
                    return Poll::Ready(Some(Err(message.into())));
                }
                Poll::Pending
            }
        }
    }
}
