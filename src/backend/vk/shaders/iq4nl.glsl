// iq4nl.glsl: the 16 values IQ4_NL and IQ4_XS indices select (iq4nl_values in util/dtype.c).
const int iq4nl_values[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10,
                                     1, 13, 25, 38, 53, 69, 89, 113);
