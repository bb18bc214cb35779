// mul_team.glsl: the last step of a matrix-vector team (mul_common.glsl, mul_dot_common.glsl).
// The team's lanes hold partial sums of its VR rows; they are added as a tree over TEAM lanes
// (by subgroup shuffles with MUL_SUBGROUP, else through team_part in shared memory, lane 0
// adding the team's slots in the same tree order) and lane 0 stores the rows that exist.
// Include after p, y, team_part, TEAM and VR; called by every invocation of the workgroup
// (the shared-memory tree has barriers).

void team_store(float acc[VR], uint tid, uint lane, uint team, uint row0, uint t)
{
#ifdef MUL_SUBGROUP
    for (uint r = 0; r < VR; r++)
        for (uint h = TEAM / 2; h > 0; h >>= 1)
            if (h < team)
                acc[r] += subgroupShuffleXor(acc[r], h);
    if (lane == 0)
        for (uint r = 0; r < VR; r++)
            if (row0 + r < p.n_rows)
                y[t * p.n_out + p.row0 + row0 + r] = acc[r];
#else
    for (uint r = 0; r < VR; r++) {
        team_part[tid] = acc[r];
        barrier();
        if (lane == 0 && row0 + r < p.n_rows) {
            float s[TEAM];
            for (uint l = 0; l < TEAM; l++)
                s[l] = l < team ? team_part[tid + l] : 0.0;
            for (uint h = TEAM / 2; h > 0; h >>= 1)
                for (uint l = 0; l < h; l++)
                    s[l] += s[l + h];
            y[t * p.n_out + p.row0 + row0 + r] = s[0];
        }
        barrier();
    }
#endif
}
