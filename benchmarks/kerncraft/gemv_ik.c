float A[M][K];
float x[K];
float y[M];

for(int io=0; io<MO; ++io) {
    for(int ko=0; ko<KO; ++ko) {
        for(int ii=0; ii<TM; ++ii) {
            for(int kk=0; kk<TK; ++kk) {
                y[io*TM+ii] = y[io*TM+ii] + A[io*TM+ii][ko*TK+kk] * x[ko*TK+kk];
            }
        }
    }
}
