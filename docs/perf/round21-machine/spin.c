#include <stdio.h>
#include <time.h>
#include <stdlib.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int c,char**v){double dur=atof(v[1]);double s=now(),p=s,gap=0;int n=0;double maxg=0;
 while(1){double t=now(); if(t-p>0.002){n++;gap+=t-p;if(t-p>maxg)maxg=t-p;} p=t; if(t-s>dur)break;}
 printf("gaps>2ms %d, total %.0f ms (%.1f%%), max %.1f ms\n",n,gap*1000,gap/dur*100,maxg*1000);}
