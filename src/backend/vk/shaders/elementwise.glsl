// elementwise.glsl: the grid of the elementwise shaders. 256 invocations per workgroup, one
// element each; workgroups run along x and spill into y (x alone may stop at 65535), so
// element i = (y * groups_x + x) * 256 + local. Each shader's push constants start with n
// (elements) and groups_x.

layout(local_size_x = 256) in;

uint elem_index(uint groups_x)
{
    return (gl_WorkGroupID.y * groups_x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
}
