//! Private logging macros: route to `defmt` with the `defmt` feature, compile
//! to nothing otherwise (arguments are still type-checked, inside a closure
//! that is never called, so they cost nothing).

macro_rules! debug {
    ($s:literal $(, $x:expr)* $(,)?) => {{
        #[cfg(feature = "defmt")]
        ::defmt::debug!($s $(, $x)*);
        #[cfg(not(feature = "defmt"))]
        let _ = || {
            $(let _ = &$x;)*
        };
    }};
}

pub(crate) use debug;
