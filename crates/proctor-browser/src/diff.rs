//! Comparing a screenshot with its reference image: the share of pixels that differ.

use image::{ImageFormat, RgbaImage};
use serde::{Deserialize, Serialize};

use crate::error::DiffError;

/// How a screenshot differs from its reference.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Diff {
    /// The screenshot's size, width × height.
    pub size: (u32, u32),
    /// The reference's size.
    pub reference_size: (u32, u32),
    /// Pixels whose colour or opacity differ in any channel (every pixel when the sizes differ).
    pub differing: u64,
    /// `differing` as a share of the larger image's pixels, 0 to 1.
    pub share: f64,
}

/// Compares two PNGs pixel by pixel (as 8-bit RGBA). Images of different sizes differ in every
/// pixel.
pub fn compare(screenshot: &[u8], reference: &[u8]) -> Result<Diff, DiffError> {
    let a = decode(screenshot, "screenshot")?;
    let b = decode(reference, "reference image")?;
    let total = u64::from(a.width().max(b.width())) * u64::from(a.height().max(b.height()));
    let differing = if a.dimensions() == b.dimensions() {
        a.pixels().zip(b.pixels()).filter(|(p, q)| p != q).count() as u64
    } else {
        total
    };
    let share = if total == 0 {
        0.0
    } else {
        differing as f64 / total as f64
    };
    Ok(Diff {
        size: a.dimensions(),
        reference_size: b.dimensions(),
        differing,
        share,
    })
}

fn decode(bytes: &[u8], which: &'static str) -> Result<RgbaImage, DiffError> {
    image::load_from_memory_with_format(bytes, ImageFormat::Png)
        .map(|i| i.to_rgba8())
        .map_err(|e| DiffError::NotPng {
            which,
            why: e.to_string(),
        })
}

/// Whether `bytes` start like a PNG file.
pub fn is_png(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\x89PNG\r\n\x1a\n")
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;

    fn png(w: u32, h: u32, paint: impl Fn(u32, u32) -> [u8; 4]) -> Vec<u8> {
        let img = RgbaImage::from_fn(w, h, |x, y| image::Rgba(paint(x, y)));
        let mut out = Cursor::new(Vec::new());
        img.write_to(&mut out, ImageFormat::Png).unwrap();
        out.into_inner()
    }

    #[test]
    fn equal_images_do_not_differ_and_each_changed_pixel_counts() {
        let white = png(10, 10, |_, _| [255, 255, 255, 255]);
        let d = compare(&white, &white).unwrap();
        assert_eq!((d.differing, d.share), (0, 0.0));
        let dotted = png(10, 10, |x, y| {
            if x < 5 && y == 0 {
                [250, 255, 255, 255]
            } else {
                [255, 255, 255, 255]
            }
        });
        let d = compare(&dotted, &white).unwrap();
        assert_eq!(d.differing, 5);
        assert!((d.share - 0.05).abs() < 1e-12, "{d:?}");
        assert!(is_png(&white));
    }

    #[test]
    fn images_of_different_sizes_differ_everywhere() {
        let a = png(10, 10, |_, _| [0, 0, 0, 255]);
        let b = png(10, 12, |_, _| [0, 0, 0, 255]);
        let d = compare(&a, &b).unwrap();
        assert_eq!(d.differing, 120);
        assert_eq!(d.share, 1.0);
        assert_eq!((d.size, d.reference_size), ((10, 10), (10, 12)));
    }

    #[test]
    fn a_file_that_is_not_a_png_is_named() {
        let a = png(1, 1, |_, _| [0, 0, 0, 255]);
        let e = compare(&a, b"GIF89a").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("the reference image is not a readable PNG"),
            "{e}"
        );
        assert!(!is_png(b"GIF89a"));
    }
}
