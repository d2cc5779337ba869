//! Private logging macros: route to `defmt` with the `defmt` feature, compile
//! to nothing otherwise (arguments are still type-checked, never evaluated
//! for output).

macro_rules! debug {
    ($s:literal $(, $x:expr)* $(,)?) => {{
        #[cfg(feature = "defmt")]
        ::defmt::debug!($s $(, $x)*);
        #[cfg(not(feature = "defmt"))]
        let _ = ($(&$x,)*);
    }};
}

pub(crate) use debug;
